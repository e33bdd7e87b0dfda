"""`python -m eval comments`: the comments the bot would post on unseen issues, measured as the App sees them.

Each fold of the task's first repetition is commented by an engine fitted without it (the same folds, case
bases and leakage rules as `run`, from `prepare_splits`), through the bot's own composer. The App sees an issue
when it is opened: each gold window is cut to its opening post (bot/reading/opening.py), with `created_at` from the
opening header; a window that starts mid-thread has no opening post and is not scored (counted). Pull requests
are never commented on. With `memory`, each issue's repository memory (the real store of bot/memory/ on a
temporary SQLite) holds the gold threads of its repository opened before it, so the deployed App's "Seen
before" and "Asked before" are measured too. Every comment is scored in `eval/comment_scoring.py`.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bot.comment.compose import compose
from bot.comment.policy import CommentPolicy
from bot.core.domain import Case, TriageResult
from bot.core.settings import Settings
from bot.knowledge.taxonomy import Taxonomy, load_taxonomy
from bot.memory.queries import Memory
from bot.models.engine import ENGINE_VERSION, fit_engine
from bot.reading.opening import has_opening_post, opened_at, opening_post
from eval import provenance
from eval.comment_memory import gold_memory, recalled
from eval.comment_scoring import score_comment, summarise, table_markdown
from eval.jobs import JobRunner, make_embedder
from eval.progress import Reporter
from eval.runner import Context, prepare_splits
from eval.splits import Split
from eval.task import RunConfig

PREDICTOR = "default"


def run_comments(config: RunConfig, settings: Settings, reporter: Reporter, command: str, *, memory: bool = False
                 ) -> dict[str, Any]:
    """Comment every opened issue of every fold of the first repetition; the self-describing results object."""
    started, clock = dt.datetime.now(dt.UTC), time.monotonic()
    settings = settings.model_copy(update={"seed": config.seed})
    taxonomy = load_taxonomy(settings.taxonomy)
    policy = CommentPolicy.from_settings(settings)
    samples: list[dict[str, Any]] = []
    unscored = 0
    with JobRunner(1) as jobs:
        ctx = Context(config, settings, taxonomy, make_embedder(settings), reporter, jobs)
        for datasets in config.evaluated_sets:
            prepared = prepare_splits(ctx, datasets)
            splits = [s for s in prepared.splits if s.repeat == 0]
            unscored += sum(s.unscored for s in splits)  # cut away by the as-opened splits (eval/splits.py)
            known = {c.id: c for s in splits[:1] for c in [*s.train, *s.test]}
            with ExitStack() as stack:
                held = stack.enter_context(gold_memory(list(known.values()), ctx.embedder, settings)) if memory \
                    else None
                for split in splits:
                    fold_samples, skipped = _comment_fold(ctx, split, policy, known, held)
                    samples += fold_samples
                    unscored += skipped
    return {
        "command": command, "created_utc": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - clock, 1), "predictor": PREDICTOR, "memory": memory,
        "not_opened": unscored,
        "config": config.model_dump(mode="json"), "policy": policy.model_dump(mode="json"),
        "provenance": {"git": provenance.git_revision(), "packages": provenance.package_versions(),
                       "engine_version": ENGINE_VERSION,
                       "taxonomy": provenance.taxonomy_record(settings.taxonomy, taxonomy.version),
                       "prompts": provenance.prompt_versions(), "embedding_model": settings.embedding_model},
        "summary": summarise(samples), "samples": samples,
    }


def _comment_fold(ctx: Context, split: Split, policy: CommentPolicy, known: dict[str, Case],
                  memory: Memory | None) -> tuple[list[dict[str, Any]], int]:
    """The fold's opened issues commented (and how many windows had no opening post to comment on)."""
    clock = time.monotonic()
    engine = fit_engine(ctx.settings, split.train, embedder=ctx.embedder, predictor_name=PREDICTOR,
                        taxonomy=ctx.taxonomy, calibrate=True, use_cache=ctx.config.fit_cache,
                        progress=ctx.reporter.engine)
    windows = [c for c in split.test if c.type != "pull_request"]  # the bot never comments on a pull request
    issues = [as_opened(c) for c in windows if has_opening_post(c.body)]
    results = engine.triage_many(issues, progress=ctx.reporter.engine)
    samples = []
    for case, result in zip(issues, results, strict=True):
        result = _dated(result, known)
        if memory is not None:
            result = result.model_copy(update={"related": recalled(memory, ctx.settings, ctx.embedder, case)})
        samples.append({"fold": split.fold, **_scored(case, result, ctx.taxonomy, policy, known)})
    ctx.reporter.finished(f"fold {split.fold + 1}: {len(issues)} opened issues commented "
                          f"({len(windows) - len(issues)} windows without an opening post)", time.monotonic() - clock)
    return samples, len(windows) - len(issues)


def as_opened(case: Case) -> Case:
    """The issue as the App saw it when it was opened: the opening post, dated by its header."""
    return case.model_copy(update={"body": opening_post(case.body), "created_at": opened_at(case.body)})


def _dated(result: TriageResult, known: dict[str, Case]) -> TriageResult:
    """Each labelled case the engine cites, with its opening date (the case pack's per-case dates, where the
    engine's build does not carry them yet), so the comment keeps out what was opened later."""
    neighbours = [n if n.created_at or n.id not in known
                  else n.model_copy(update={"created_at": known[n.id].created_at}) for n in result.neighbours]
    return result.model_copy(update={"neighbours": neighbours})


def _scored(case: Case, result: TriageResult, taxonomy: Taxonomy, policy: CommentPolicy, known: dict[str, Case]
            ) -> dict[str, Any]:
    plan, markdown = compose(case, result, taxonomy, policy)
    return score_comment(case, result, plan, markdown, opened={k: c.created_at for k, c in known.items()})


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
