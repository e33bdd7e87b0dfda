"""Scores on subgroups: per gold file, issues apart from pull requests, per framework, and whether the stored
window shows the resolution (root cause and fix pattern are far easier to read off a thread that shows it).

An overall score can hide easy subgroups (fix pattern on pull requests is nearly always `framework_patch`):
every slice is scored by the same rules as the whole, mean over repetitions, beside the majority baseline.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bot.core.settings import AXES
from bot.knowledge.taxonomy import Taxonomy
from eval.metrics import accuracy, coverage_precision, macro_f1
from eval.scoring import Sample, axis_view, by_repeat

SLICES: dict[str, Callable[[Sample], str]] = {
    "file": lambda s: s.get("source") or "?",
    "type": lambda s: "pull request" if s.get("type") == "pull_request" else "issue",
    "framework": lambda s: s.get("repo") or "(none)",
    "resolution": lambda s: {True: "resolution visible", False: "resolution not visible"}.get(
        s.get("resolution_visible"), "not annotated"),  # type: ignore[arg-type]
}


def slice_scores(samples: dict[str, list[Sample]], taxonomy: Taxonomy) -> dict[str, dict[str, object]]:
    """{dimension: {value: {predictor: {axis: {n, accuracy, macro_f1}}}}}; a dimension with one value is left out."""
    out: dict[str, dict[str, object]] = {}
    for dimension, key in SLICES.items():
        values = sorted({key(s) for rows in samples.values() for s in rows})
        if len(values) < 2:
            continue
        table: dict[str, object] = {}
        for value in values:
            table[value] = {name: _score([s for s in rows if key(s) == value], taxonomy)
                            for name, rows in samples.items()}
        out[dimension] = table
    return out


def _score(samples: list[Sample], taxonomy: Taxonomy) -> dict[str, dict[str, float | None]]:
    scores: dict[str, dict[str, float | None]] = {}
    for axis in AXES:
        views = [axis_view(r, axis, taxonomy) for r in by_repeat(samples).values()]
        if not views or not views[0].gold:
            continue
        shown = [coverage_precision(v.gold, v.shown) for v in views]
        scores[axis] = {"n": len(views[0].gold),
                        "accuracy": round(float(np.mean([accuracy(v.gold, v.predicted) for v in views])), 4),
                        "macro_f1": round(float(np.mean([macro_f1(v.gold, v.predicted) for v in views])), 4),
                        "coverage": round(float(np.mean([c for c, _ in shown])), 4),
                        "shown_accuracy": _mean_or_none([p for _, p in shown])}
    return scores


def _mean_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(float(np.mean(known)), 4) if known else None
