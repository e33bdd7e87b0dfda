"""Running a benchmark with the bot's own engine: fit per split, triage each test record, score, describe."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.core.domain import Case
from bot.core.settings import AXES, Settings
from bot.knowledge.taxonomy import Taxonomy, load_taxonomy
from bot.models.embedding import Embedder, text_hash
from bot.models.engine import ENGINE_VERSION
from bot.reading.normalise import normalise
from eval import provenance
from eval.data import LoadedSet, file_sha256, load_set
from eval.estimate import record_timings
from eval.jobs import Job, JobOutput, JobRunner, make_embedder
from eval.paired import compare_all
from eval.progress import Reporter
from eval.scoring import Sample, score_samples
from eval.slices import slice_scores
from eval.splits import (
    Embedded,
    Split,
    cv_splits,
    framework_splits,
    temporal_split,
    transfer_split,
    with_text,
)
from eval.task import RunConfig

RESULTS_SCHEMA = 3  # bump when the layout of results.json changes (2: repeats, paired, slices; 3: text)
SETTINGS_RECORDED = {"taxonomy", "embedding_model", "neighbours", "thresholds", "use_silver", "case_text", "seed",
                     "llm", "llm_base_url", "llm_max_tokens", "llm_timeout_s"}
MAX_NOTED_PROBLEMS = 10


@dataclass
class Context:
    config: RunConfig
    settings: Settings
    taxonomy: Taxonomy
    embedder: Embedder
    reporter: Reporter
    jobs: JobRunner


def count_jobs(config: RunConfig) -> int:
    """Fit-and-predict jobs of a run, for the progress bar (a framework split counts as its folds)."""
    return len(job_predictors(config))


def job_predictors(config: RunConfig) -> list[str]:
    """The predictor of each fit-and-predict job of a run, for the progress bar and the estimate."""
    per_dataset = 1 if config.mode == "transfer" or config.fold_by == "time" else config.folds * config.repeats
    if config.mode == "cv" and config.fold_by == "framework":
        per_dataset = config.folds
    return [name for _ in config.evaluated_sets for name in config.predictors for _ in range(per_dataset)]


def run_benchmark(config: RunConfig, settings: Settings, reporter: Reporter, *, workers: int = 1,
                  command: str = "") -> dict[str, Any]:
    """Every dataset of the config through every predictor; the self-describing results object."""
    started, clock = dt.datetime.now(dt.UTC), time.monotonic()
    settings = settings.model_copy(update={"seed": config.seed, "case_text": config.train_text or settings.case_text})
    taxonomy = load_taxonomy(settings.taxonomy)
    with JobRunner(workers) as jobs:
        context = Context(config, settings, taxonomy, make_embedder(settings), reporter, jobs)
        evaluations = [evaluate_datasets(context, datasets) for datasets in config.evaluated_sets]
    return {
        "schema": RESULTS_SCHEMA, "command": command, "created_utc": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - clock, 1), "workers": workers,
        "config": {**config.model_dump(mode="json"), "mode": config.mode,
                   "settings": settings.model_dump(mode="json", include=SETTINGS_RECORDED)},
        "seeds": {"folds": config.seed, "bootstrap": config.seed, "engine_calibration": settings.seed},
        "provenance": {
            "git": provenance.git_revision(), "packages": provenance.package_versions(),
            "machine": provenance.machine(), "engine_version": ENGINE_VERSION,
            "taxonomy": provenance.taxonomy_record(settings.taxonomy, taxonomy.version),
            "prompts": provenance.prompt_versions(), "embedding_model": settings.embedding_model,
            "data_files": _data_files(config),
        },
        "evaluations": evaluations,
    }


@dataclass
class Prepared:
    """A test population loaded, embedded and split without leakage: what every benchmark of it runs on."""

    name: str
    loaded: list[LoadedSet]
    others: list[LoadedSet]
    other_paths: tuple[Path, ...]
    rule: str
    tested: Embedded
    splits: list[Split]
    leakage: dict[str, object]


def prepare_splits(ctx: Context, datasets: tuple[Path, ...]) -> Prepared:
    """Load the test files and the case-base files, embed them, and split (folds, framework or transfer)."""
    config = ctx.config
    name = " + ".join(d.name for d in datasets)
    ctx.reporter.status(f"{name}: loading and embedding")
    loaded = [_load(ctx, dataset) for dataset in datasets]
    if config.mode == "transfer":
        other_paths, rule = config.train_on, "train_on (transfer: all of it is the case base)"
    else:
        other_paths, rule = config.extra_cases_for_all(datasets)
    others = [_load(ctx, path) for path in other_paths]
    tested = Embedded.of(_distinct(loaded), ctx.embedder)
    base = Embedded.of(_distinct(others), ctx.embedder)
    if config.mode == "transfer":
        splits, leakage = transfer_split(tested, base, config.near_duplicate_cosine)
    elif config.fold_by == "framework":
        splits, leakage = framework_splits(tested, base, config.near_duplicate_cosine)
    elif config.fold_by == "time":
        splits, leakage = temporal_split(tested, base, config.near_duplicate_cosine)
    else:
        splits, leakage = cv_splits(tested, base, config.folds, config.seed, config.near_duplicate_cosine,
                                    config.repeats)
    splits = with_text(splits, config.text)
    leakage = {**leakage, "text": config.text,
               "not_scored_without_opening_post": sum(s.unscored for s in splits if s.repeat == 0)}
    if config.text == "opened":
        ctx.reporter.note(f"eval: {name}: as opened: {leakage['not_scored_without_opening_post']} of "
                          f"{len(tested.cases)} records have no opening post (their window starts mid-thread): "
                          "they train but are not scored")
    return Prepared(name, loaded, others, other_paths, rule, tested, splits, leakage)


def evaluate_datasets(ctx: Context, datasets: tuple[Path, ...]) -> dict[str, object]:
    """One test population (a dataset, or several pooled): load, split without leakage, run, score."""
    config = ctx.config
    prepared = prepare_splits(ctx, datasets)
    name, loaded, others, splits, tested = (prepared.name, prepared.loaded, prepared.others, prepared.splits,
                                            prepared.tested)
    other_paths, rule, leakage = prepared.other_paths, prepared.rule, prepared.leakage
    outputs = run_jobs(ctx, name, splits, input_hashes(splits))
    order = {case_id: i for i, case_id in enumerate(tested.ids)}
    allowed = shared_labels(splits[0], ctx.taxonomy) if config.mode == "transfer" else None
    summaries = {p: summarise_predictor(ctx, outputs[p], order, allowed) for p in config.predictors}
    samples = {p: list(summary["samples"]) for p, summary in summaries.items()}  # type: ignore[call-overload]
    return {
        "dataset": ", ".join(str(d) for d in datasets), "name": name, "mode": config.mode, "text": config.text,
        "fold_by": "transfer" if config.mode == "transfer" else config.fold_by,
        "case_base_files": [str(p) for p in other_paths], "case_base_rule": rule,
        "folds": len([s for s in splits if s.repeat == 0]), "repeats": max(s.repeat for s in splits) + 1,
        "fold_names": [s.name for s in splits if s.repeat == 0],
        "data": {"test": _summary(loaded), "files": [x.summary() for x in loaded],
                 "case_base": [o.summary() for o in others]},
        "leakage": leakage,
        "shared_labels": None if allowed is None else {axis: sorted(v) for axis, v in allowed.items()},
        "predictors": summaries,
        "paired": {"reference": config.baseline,
                   "comparisons": compare_all(samples, config.baseline, ctx.taxonomy, seed=config.seed,
                                              resamples=config.bootstrap_resamples)},
        "slices": slice_scores(samples, ctx.taxonomy) if config.mode == "cv" else {},
    }


def input_hashes(splits: Sequence[Split]) -> dict[str, str]:
    """Per test record, the sha256 of the normalised text the engine is given (the opening post, as opened)."""
    out: dict[str, str] = {}
    for split in splits:
        for case in split.test:
            if case.id not in out:
                out[case.id] = text_hash(normalise(case).text)
    return out


def shared_labels(split: Split, taxonomy: Taxonomy) -> dict[str, set[str]]:
    """Per axis, the labels both the case base and the test set hold (transfer scores only those)."""
    out: dict[str, set[str]] = {}
    for axis in AXES:
        train = {c.labels.get(axis) for c in split.train if taxonomy.is_established(axis, c.labels.get(axis))}
        test = {c.labels.get(axis) for c in split.test if taxonomy.is_established(axis, c.labels.get(axis))}
        out[axis] = {str(x) for x in train & test}
    return out


def _summary(loaded: Sequence[LoadedSet]) -> dict[str, object]:
    """The test files' record counts added up (one file: its own summary)."""
    if len(loaded) == 1:
        return loaded[0].summary()
    keys = ("records", "skipped_lines", "skipped_no_text", "skipped_duplicate_ids")
    summaries = [x.summary() for x in loaded]
    return {"file": ", ".join(str(x.path) for x in loaded), **{k: sum(int(str(s[k])) for s in summaries) for k in keys},
            "problems": [p for s in summaries for p in s["problems"]]}  # type: ignore[attr-defined]


def run_jobs(ctx: Context, dataset: str, splits: Sequence[Split], hashes: dict[str, str]
             ) -> dict[str, list[JobOutput]]:
    """Every predictor on every split; outputs grouped by predictor, in fold order."""
    jobs = [Job(name, split, ctx.settings, hashes, ctx.config.fit_cache, ctx.config.calibrate)
            for name in ctx.config.predictors for split in splits]
    running = "one at a time" if ctx.jobs.workers == 1 else f"{ctx.jobs.workers} at a time"
    ctx.reporter.status(f"{dataset}: {len(jobs)} fit-and-predict jobs, {running}")
    outputs: dict[str, list[JobOutput]] = {name: [] for name in ctx.config.predictors}
    for job, output in ctx.jobs.run(jobs, ctx.embedder, ctx.reporter.engine):
        outputs[job.predictor].append(output)
        where = job.split.name or f"fold {job.split.fold + 1}"
        ctx.reporter.finished(f"{dataset} {job.predictor} repeat {job.split.repeat + 1} {where}",
                              output.fit_s + output.predict_s)
    record_timings(ctx.settings.cache_dir, [o for found in outputs.values() for o in found], ctx.config.calibrate,
                   ctx.jobs.workers)
    return {name: sorted(found, key=lambda o: (o.repeat, o.fold)) for name, found in outputs.items()}


def summarise_predictor(ctx: Context, outputs: Sequence[JobOutput], order: dict[str, int],
                        allowed: dict[str, set[str]] | None = None) -> dict[str, object]:
    """Scores, timing, usage and per-sample predictions of one predictor over all splits."""
    samples: list[Sample] = sorted((s for o in outputs for s in o.samples),
                                   key=lambda s: (s["repeat"], order[s["id"]]))
    usage: dict[str, float] | None = None
    for output in outputs:
        usage = add_usage(usage, output.usage)
    thresholds = {axis: ctx.settings.threshold(axis) for axis in AXES}
    return {
        "describe": outputs[-1].describe, "model_id": outputs[-1].model_id, "usage": usage,
        "timing": {"fit_s": round(sum(o.fit_s for o in outputs), 2),
                   "predict_s": round(sum(o.predict_s for o in outputs), 2)},
        "fallbacks": sum(s["fallback"] is not None for s in samples),
        "axes": score_samples(samples, ctx.taxonomy, thresholds, seed=ctx.config.seed,
                              resamples=ctx.config.bootstrap_resamples, allowed=allowed),
        "samples": samples,
    }


def add_usage(total: dict[str, float] | None, more: object) -> dict[str, float] | None:
    """Sum the numeric counters (calls, cache hits, tokens, latency) an LLM predictor reports per fold."""
    if not isinstance(more, dict):
        return total
    merged = dict(total or {})
    for key, value in more.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            merged[str(key)] = round(merged.get(str(key), 0) + value, 3)
    return merged


def _load(ctx: Context, path: Path) -> LoadedSet:
    loaded = load_set(path, ctx.taxonomy)
    for problem in loaded.problems[:MAX_NOTED_PROBLEMS]:
        ctx.reporter.note(f"eval: warning: {problem}")
    if len(loaded.problems) > MAX_NOTED_PROBLEMS:
        ctx.reporter.note(f"eval: warning: {path}: {len(loaded.problems) - MAX_NOTED_PROBLEMS} more problems "
                          "(all of them are listed in results.json)")
    if loaded.skipped_lines or loaded.no_text or loaded.duplicate_ids:
        ctx.reporter.note(f"eval: {path}: {len(loaded.cases)} records used; skipped {loaded.skipped_lines} "
                          f"bad lines, {loaded.no_text} records without text, "
                          f"{loaded.duplicate_ids} duplicate ids")
    return loaded


def _distinct(sets: Sequence[LoadedSet]) -> list[Case]:
    """The cases of several files, first occurrence of an id kept."""
    seen: set[str] = set()
    out: list[Case] = []
    for loaded in sets:
        for case in loaded.cases:
            if case.id not in seen:
                seen.add(case.id)
                out.append(case)
    return out


def _data_files(config: RunConfig) -> dict[str, dict[str, object]]:
    """sha256 and size of every file the run read."""
    paths = [*config.datasets, *config.train_on]
    for datasets in config.evaluated_sets:
        paths += config.extra_cases_for_all(datasets)[0]
    return {str(p): {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in dict.fromkeys(paths)
            if p.is_file()}
