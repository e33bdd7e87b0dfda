"""`python -m eval comments`: the comments the bot would post on unseen issues, measured.

Each fold of the task's first repetition is commented by an engine fitted without it (the same folds, case
bases and leakage rules as `run`, from `prepare_splits`), through the bot's own composer. Pull requests are
never commented on, so only issues are. Every comment is scored in `eval/comment_scoring.py`.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from bot.comment.compose import compose
from bot.comment.policy import CommentPolicy
from bot.domain import Case, TriageResult
from bot.engine import ENGINE_VERSION, fit_engine
from bot.settings import Settings
from bot.taxonomy import Taxonomy, load_taxonomy
from eval import provenance
from eval.comment_scoring import score_comment, summarise, table_markdown
from eval.jobs import JobRunner, make_embedder
from eval.progress import Reporter
from eval.runner import Context, prepare_splits
from eval.splits import Split
from eval.task import RunConfig

PREDICTOR = "default"


def run_comments(config: RunConfig, settings: Settings, reporter: Reporter, command: str) -> dict[str, Any]:
    """Comment every issue of every fold of the first repetition; the self-describing results object."""
    started, clock = dt.datetime.now(dt.UTC), time.monotonic()
    settings = settings.model_copy(update={"seed": config.seed})
    taxonomy = load_taxonomy(settings.taxonomy)
    policy = CommentPolicy.from_settings(settings)
    samples: list[dict[str, Any]] = []
    with JobRunner(1) as jobs:
        ctx = Context(config, settings, taxonomy, make_embedder(settings), reporter, jobs)
        for datasets in config.evaluated_sets:
            prepared = prepare_splits(ctx, datasets)
            for split in (s for s in prepared.splits if s.repeat == 0):
                samples += _comment_fold(ctx, split, policy)
    return {
        "command": command, "created_utc": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - clock, 1), "predictor": PREDICTOR,
        "config": config.model_dump(mode="json"), "policy": policy.model_dump(mode="json"),
        "provenance": {"git": provenance.git_revision(), "packages": provenance.package_versions(),
                       "engine_version": ENGINE_VERSION,
                       "taxonomy": provenance.taxonomy_record(settings.taxonomy, taxonomy.version),
                       "prompts": provenance.prompt_versions(), "embedding_model": settings.embedding_model},
        "summary": summarise(samples), "samples": samples,
    }


def _comment_fold(ctx: Context, split: Split, policy: CommentPolicy) -> list[dict[str, Any]]:
    clock = time.monotonic()
    engine = fit_engine(ctx.settings, split.train, embedder=ctx.embedder, predictor_name=PREDICTOR,
                        taxonomy=ctx.taxonomy, calibrate=True, use_cache=ctx.config.fit_cache,
                        progress=ctx.reporter.engine)
    issues = [c for c in split.test if c.type != "pull_request"]  # the bot never comments on a pull request
    results = engine.triage_many(issues, progress=ctx.reporter.engine)
    samples = [_sample(case, result, ctx.taxonomy, policy, split.fold) for case, result in zip(issues, results,
                                                                                                strict=True)]
    ctx.reporter.finished(f"fold {split.fold + 1}: {len(issues)} issues commented", time.monotonic() - clock)
    return samples


def _sample(case: Case, result: TriageResult, taxonomy: Taxonomy, policy: CommentPolicy, fold: int
            ) -> dict[str, Any]:
    plan, markdown = compose(case, result, taxonomy, policy)
    return {"fold": fold, **score_comment(case, result, plan, markdown)}


def write_comment_outputs(results: dict[str, Any], out: Path) -> list[Path]:
    """results.json, comments.jsonl (`{"id", "comment"}` lines, as `predict --with-comment` writes them, for
    comment_metrics.py) and comments.md (the table the README carries)."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json", out / "comments.jsonl", out / "comments.md"]
    written[0].write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    with written[1].open("w", encoding="utf-8") as handle:
        for sample in results["samples"]:
            handle.write(json.dumps({"id": sample["id"], "comment": sample["comment"]}, ensure_ascii=False) + "\n")
    written[2].write_text(table_markdown(results), encoding="utf-8")
    return written


def count_folds(config: RunConfig) -> int:
    return len(config.evaluated_sets) * config.folds
