"""Which views and which decoding for kind, stage and symptom: every combination scored on one fit per fold.

For each fold of the task's grouped cross-validation (the first `--repeats` repetitions, the same folds as
`python -m eval run --task ...`), fits `linear-structured`'s views once: the four views of `linear-fused`, the cue view
and the structure view (no calibration: the top label does not depend on it). Then it scores, on those same
predictions, the fusion of every set of extra views, under every joint decoding (off, on kind alone, on all
three), and, with `--stacking`, a logistic regression per axis on the views' log
probabilities fitted on out-of-fold predictions of the training part (3 inner folds: 3 more fits per fold).
Per combination: accuracy and macro-F1 (mean over repetitions), the paired difference with `linear-fused`'s own
four views (95% bootstrap interval), and the error counts issue #16 names (stage data_model_preparation ->
training, kind usage_question -> bug_report).

    python bench/label_views.py [--task ddl-dev-cv] [--repeats 1] [--jobs 2] [--stacking] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from bot.core.settings import Settings
from bot.knowledge.taxonomy import load_taxonomy
from bot.models.engine import build_training_set, make_queries
from bot.models.joint import JOINT_AXES, JointDecoder
from bot.models.predictors.base import normalise_distribution
from bot.models.predictors.fused import FLOOR, VIEWS, fuse
from bot.models.predictors.structured import EXTRA_VIEWS, StructuredPredictor
from bot.reading.normalise import normalise
from eval.cli import load_settings
from eval.data import load_set
from eval.jobs import make_embedder
from eval.paired import compare_axis
from eval.splits import Embedded, Split, cv_splits
from eval.task import load_task, task_config

INNER_FOLDS = 3
WEIGHTS = (0.5, 1.0)  # an extra view's exponent on top of the base views' geometric mean (None: one mean of all)
# (strength, axes whose joint marginal is taken): off; kind read off the joint (kind gates, not gated); all three
JOINTS = ((0.0, ()), (0.5, ("kind",)), (1.0, ("kind",)), (0.25, JOINT_AXES))
# Each extra view where it speaks: the cues say what kind of report it is, the failure's structure where and how
# the run failed.
PER_AXIS = {
    "kind +cues+structure, stage +structure, symptom +structure": {
        "kind": ("cues", "structure"), "stage": ("structure",), "symptom": ("structure",)},
    "kind +cues, stage +structure, symptom +structure": {
        "kind": ("cues",), "stage": ("structure",), "symptom": ("structure",)},
    "kind +cues+structure, stage +structure, symptom +cues+structure": {
        "kind": ("cues", "structure"), "stage": ("structure",), "symptom": ("cues", "structure")},
}
ERRORS = {"stage": ("data_model_preparation", "training"), "kind": ("usage_question", "bug_report")}
Dists = dict[str, list[dict[str, float]]]  # axis -> one distribution per test record


def fold_predictions(split: Split, settings: Settings, stacking: bool) -> dict[str, Any]:
    """One fold: each view's distributions of the test records, the decoder's tables, optionally a stacker's."""
    with threadpool_limits(limits=1):
        taxonomy = load_taxonomy(settings.taxonomy)
        embedder = make_embedder(settings)
        training, _ = build_training_set(split.train, taxonomy, embedder, settings.use_silver)
        predictor = StructuredPredictor(axis_views=dict.fromkeys(JOINT_AXES, EXTRA_VIEWS), strength=1.0)
        predictor.fit(training)
        normalised = [normalise(c) for c in split.test]
        queries = make_queries(training.index, normalised, embedder.embed([n.text for n in normalised]), 5)
        views = predictor.view_distributions(queries)
        out: dict[str, Any] = {
            "ids": [c.id for c in split.test], "repeat": split.repeat,
            "gold": [{a: c.labels.get(a) for a in JOINT_AXES} for c in split.test],
            "views": {v: {a: [d[a] for d in dists] for a in JOINT_AXES} for v, dists in views.items()},
            "decoder": predictor.decoder.state()}
        if stacking:
            out["stacked"] = stacked(training, queries, views)
        return out


def stacked(training: Any, queries: list[Any], test_views: dict[str, list[dict[str, dict[str, float]]]]) -> Dists:
    """Per axis, a logistic regression on the views' log probabilities, fitted on inner out-of-fold predictions."""
    rows = len(training.texts)
    inner: dict[str, list[dict[str, dict[str, float]]]] = {v: [{}] * rows for v in test_views}
    for fit_rows, held in KFold(INNER_FOLDS, shuffle=True, random_state=0).split(np.arange(rows)):
        part = training.subset(fit_rows)
        model = StructuredPredictor(axis_views=dict.fromkeys(JOINT_AXES, EXTRA_VIEWS))
        model.fit(part)
        held_queries = make_queries(part.index, [normalise(training.index.cases[i]) for i in held],
                                    training.index.vectors[held], 5)
        for view, dists in model.view_distributions(held_queries).items():
            for i, dist in zip(held, dists, strict=True):
                inner[view][int(i)] = dist
    out: Dists = {}
    for axis in JOINT_AXES:
        labels = training.taxonomy.predictable(axis)
        taught, targets = training.rows(axis)
        model = LogisticRegression(C=1.0, max_iter=3000, class_weight="balanced")
        model.fit(log_features(inner, taught, axis, labels), targets)
        probs = model.predict_proba(log_features(test_views, range(len(queries)), axis, labels))
        out[axis] = [{lab: float(dict(zip(model.classes_, row, strict=True)).get(lab, 0.0)) for lab in labels}
                     for row in probs]
    return out


def fuse_weighted(base: list[dict[str, float]], extra: list[dict[str, float]], weight: float) -> dict[str, float]:
    """The base views' geometric mean times each extra view raised to `weight`, renormalised (at weight 1 an extra
    view is evidence of its own on top of the base, not one vote among the views)."""
    labels = tuple(base[0])
    logs = np.mean([[np.log(max(d[label], FLOOR)) for label in labels] for d in base], axis=0)
    for dist in extra:
        logs = logs + weight * np.log(np.maximum([dist[label] for label in labels], FLOOR))
    scores = np.exp(logs - logs.max())
    return normalise_distribution(dict(zip(labels, scores.tolist(), strict=True)), labels)


def log_features(per_view: dict[str, list[dict[str, dict[str, float]]]], rows: Any, axis: str,
                 labels: tuple[str, ...]) -> np.ndarray:
    """One row per record: every view's log probability of every label."""
    return np.log(np.maximum([[per_view[v][i][axis][lab] for v in per_view for lab in labels] for i in rows], 1e-9))


def decode(fold: dict[str, Any], extra: tuple[str, ...] | dict[str, tuple[str, ...]], weight: float | None,
           strength: float, joint_axes: tuple[str, ...]) -> Dists:
    """Fuse the views (one geometric mean, or the extra views at `weight` on top), then decode jointly. `extra`
    may name the extra views per axis."""
    rows = range(len(fold["ids"]))
    per_axis = extra if isinstance(extra, dict) else dict.fromkeys(JOINT_AXES, extra)
    if weight is None:
        fused = [{a: fuse([fold["views"][v][a][i] for v in (*VIEWS, *per_axis[a])]) for a in JOINT_AXES}
                 for i in rows]
    else:
        fused = [{a: fuse_weighted([fold["views"][v][a][i] for v in VIEWS],
                                   [fold["views"][v][a][i] for v in per_axis[a]], weight) for a in JOINT_AXES}
                 for i in rows]
    return apply_decoder(fold, fused, strength, joint_axes)


def apply_decoder(fold: dict[str, Any], fused: list[dict[str, dict[str, float]]], strength: float,
                  joint_axes: tuple[str, ...] = JOINT_AXES) -> Dists:
    """The joint decoding's marginals on `joint_axes`; the other axes keep the fused distributions."""
    decoder = JointDecoder()
    arrays, meta = fold["decoder"]
    decoder.restore({k: np.asarray(v) for k, v in arrays.items()}, {**meta, "strength": strength, "reward": True})
    decoded = [decoder.decode(d) for d in fused]
    return {a: [(d if a in joint_axes else f)[a] for d, f in zip(decoded, fused, strict=True)] for a in JOINT_AXES}


def samples_of(folds: list[dict[str, Any]], dists: list[Dists]) -> list[dict[str, Any]]:
    """The shape `eval.paired` reads: per record and repetition, gold and the ranked labels per axis."""
    out = []
    for fold, dist in zip(folds, dists, strict=True):
        for i, case_id in enumerate(fold["ids"]):
            predicted = {}
            for axis in JOINT_AXES:
                top = sorted(dist[axis][i].items(), key=lambda item: (-item[1], item[0]))[:5]
                predicted[axis] = {"label": top[0][0], "confidence": top[0][1], "top": top}
            out.append({"id": case_id, "repeat": fold["repeat"], "gold": fold["gold"][i], "predicted": predicted})
    return out


def score(samples: list[dict[str, Any]], base: list[dict[str, Any]], taxonomy: Any) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for axis in JOINT_AXES:
        diff = compare_axis(samples, base, axis, taxonomy, seed=0, resamples=1000)  # type: ignore[arg-type]
        assert diff is not None
        row[axis] = {"accuracy_diff": diff["accuracy_diff"], "accuracy_diff_ci": diff["accuracy_diff_ci"],
                     "macro_f1_diff": diff["macro_f1_diff"], "macro_f1_diff_ci": diff["macro_f1_diff_ci"]}
    for axis, (gold, wrong) in ERRORS.items():
        row[f"{gold} -> {wrong}"] = sum(1 for s in samples if s["gold"][axis] == gold
                                        and s["predicted"][axis]["label"] == wrong)
    for axis in JOINT_AXES:
        right = [s["gold"][axis] == s["predicted"][axis]["label"] for s in samples]
        row[axis]["accuracy"] = round(float(np.mean(right)), 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="ddl-dev-cv")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--stacking", action="store_true")
    parser.add_argument("--folds-cache", type=Path, help="JSON of the folds' predictions, reused when present")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings, taxonomy, splits = task_splits(args.task, args.repeats)
    folds = cached_folds(args, splits, settings)
    baseline = samples_of(folds, [decode(f, (), None, 0.0, ()) for f in folds])
    results: dict[str, Any] = {}
    for extra in [c for n in range(len(EXTRA_VIEWS) + 1) for c in itertools.combinations(EXTRA_VIEWS, n)]:
        for weight in ([None] if not extra else [None, *WEIGHTS]):
            for strength, joint_axes in JOINTS:
                name = (f"views={'+'.join(('fused', *extra))} extra weight={weight or 'mean'} "
                        f"joint={strength} on {','.join(joint_axes) or '-'}")
                dists = [decode(f, extra, weight, strength, joint_axes) for f in folds]
                results[name] = score(samples_of(folds, dists), baseline, taxonomy)
    for label, per_axis in PER_AXIS.items():
        dists = [decode(f, per_axis, None, 0.0, ()) for f in folds]
        results[f"views per axis: {label}"] = score(samples_of(folds, dists), baseline, taxonomy)
    if args.stacking:
        for strength, joint_axes in JOINTS:
            dists = [apply_decoder(f, [{a: f["stacked"][a][i] for a in JOINT_AXES} for i in range(len(f["ids"]))],
                                   strength, joint_axes) for f in folds]
            results[f"stacked views joint={strength} on {','.join(joint_axes) or '-'}"] = \
                score(samples_of(folds, dists), baseline, taxonomy)
    print_table(results)
    if args.out:
        args.out.write_text(json.dumps({"task": args.task, "repeats": args.repeats, "results": results}, indent=1))


def task_splits(task: str, repeats: int) -> tuple[Settings, Any, list[Split]]:
    """The settings (with the task's seed), the taxonomy and the task's folds for the first `repeats`
    repetitions, as `python -m eval run --task ...` draws them."""
    settings = load_settings()
    config = task_config(load_task(task), settings.data_dir, False)
    taxonomy = load_taxonomy(settings.taxonomy)
    settings = settings.model_copy(update={"seed": config.seed})
    embedder = make_embedder(settings)
    tested = Embedded.of([c for d in config.datasets for c in load_set(d, taxonomy).cases], embedder)
    extra_paths, _ = config.extra_cases_for_all(config.datasets)
    base = Embedded.of([c for p in extra_paths for c in load_set(p, taxonomy).cases], embedder)
    splits, _ = cv_splits(tested, base, config.folds, config.seed, config.near_duplicate_cosine, repeats)
    return settings, taxonomy, splits


def cached_folds(args: argparse.Namespace, splits: list[Split], settings: Settings) -> list[dict[str, Any]]:
    """The folds' view distributions: read from `--folds-cache` when it holds them, else computed and kept there."""
    if args.folds_cache and args.folds_cache.is_file():
        return list(json.loads(args.folds_cache.read_text()))
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        folds = list(pool.map(fold_predictions, splits, [settings] * len(splits), [args.stacking] * len(splits)))
    for fold in folds:
        arrays, meta = fold["decoder"]
        fold["decoder"] = ({k: v.tolist() for k, v in arrays.items()}, meta)
    if args.folds_cache:
        args.folds_cache.write_text(json.dumps(folds))
    return folds


def print_table(results: dict[str, Any]) -> None:
    print("| combination | " + " | ".join(f"{a} acc (Δ [95%])" for a in JOINT_AXES)
          + " | " + " | ".join(f"{a} Δ macro-F1 [95%]" for a in JOINT_AXES) + " | " + " | ".join(ERRORS_COLUMNS) + " |")
    print("|---" * (1 + 2 * len(JOINT_AXES) + len(ERRORS_COLUMNS)) + "|")
    for name, row in results.items():
        acc = [f"{row[a]['accuracy']:.3f} ({row[a]['accuracy_diff']:+.3f} [{row[a]['accuracy_diff_ci'][0]:+.3f}, "
               f"{row[a]['accuracy_diff_ci'][1]:+.3f}])" for a in JOINT_AXES]
        f1 = [f"{row[a]['macro_f1_diff']:+.3f} [{row[a]['macro_f1_diff_ci'][0]:+.3f}, "
              f"{row[a]['macro_f1_diff_ci'][1]:+.3f}]" for a in JOINT_AXES]
        print(f"| {name} | " + " | ".join(acc + f1 + [str(row[c]) for c in ERRORS_COLUMNS]) + " |")


ERRORS_COLUMNS = [f"{gold} -> {wrong}" for gold, wrong in ERRORS.values()]

if __name__ == "__main__":
    main()
