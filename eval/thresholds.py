"""How much do the fixed thresholds flatter the shown-label figures? The thresholds chosen again inside the folds.

The axis thresholds (kind and stage 0.6, the others 0.5) are settings, not fitted on each fold. On calibrated
confidences, "show the label when its confidence is at least t" is the rule that maximises the expected
utility when a right label shown is worth 1, a wrong one costs c = t / (1 - t) and silence is worth 0 (0.5: a
wrong label costs what a right one gains; 0.6: one and a half times that). Selection would flatter the
figures if t had been tuned on the scored records. This measure re-chooses t the nested way: for each fold of
each repetition, the grid threshold with the best utility (at the same c) on the *other* folds' records (their
labels, never the fold's own), applied to the fold. The difference from the fixed thresholds, in shown accuracy
and coverage on the headline file, is how much a fixed choice could flatter them.

A report too bare to triage shows no label on any axis under any threshold: it stays unshown here too. Runs
record it per record (`needs_details`); for older runs it is inferred: some axis withheld a label whose
confidence cleared that axis's threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bot.knowledge.taxonomy import Taxonomy
from eval.scoring import Sample, axis_view

GRID = tuple(round(0.30 + 0.05 * i, 2) for i in range(13))  # 0.30 ... 0.90
SHOWN_AXES = ("kind", "stage", "symptom", "root_cause", "fix_pattern")


@dataclass
class Shown:
    """Shown-label accuracy and coverage of one way of choosing the thresholds, on the reported records."""

    accuracy: float | None
    coverage: float
    utility: float  # mean per reported record: +1 a right label shown, -c a wrong one, 0 silence


@dataclass
class AxisSelection:
    axis: str
    fixed_threshold: float
    cost: float
    records: int  # reported records, over all repetitions
    fixed: Shown
    nested: Shown
    chosen: list[float]  # the threshold each fold of each repetition chose on the other folds


def utility_threshold(confidence: np.ndarray, correct: np.ndarray, cost: float) -> float:
    """The grid threshold with the highest utility (right +1, wrong -cost, silence 0) on these records;
    ties go to the threshold nearest the middle of the tied run (the grid is coarse)."""
    utilities = np.array([np.sum(np.where(correct[confidence >= t], 1.0, -cost)) for t in GRID])
    best = np.flatnonzero(np.isclose(utilities, utilities.max()))
    return GRID[int(best[len(best) // 2])]


def _shown(correct: np.ndarray, mask: np.ndarray, cost: float) -> Shown:
    n = len(correct)
    shown = int(mask.sum())
    right = int((correct & mask).sum())
    return Shown(accuracy=right / shown if shown else None, coverage=shown / n if n else 0.0,
                 utility=(right - cost * (shown - right)) / n if n else 0.0)


def is_bare(sample: Sample, thresholds: Mapping[str, float]) -> bool:
    """Whether the engine withheld every label of this record as too bare to triage."""
    if "needs_details" in sample:
        return bool(sample["needs_details"])
    return any(answer["label"] is None and answer["confidence"] >= thresholds.get(axis, 1.0)
               for axis, answer in sample["predicted"].items())


def select_axis(samples: Sequence[Sample], axis: str, taxonomy: Taxonomy, fixed_threshold: float,
                report_source: str | None, thresholds: Mapping[str, float] | None = None) -> AxisSelection:
    """Fixed against nested thresholds for one axis; reported on the records of `report_source` (all if None).
    `thresholds` (every axis's, default this one's alone) tell a bare report in a run that did not record it."""
    cost = fixed_threshold / (1.0 - fixed_threshold)
    view = axis_view(samples, axis, taxonomy)
    rows = [samples[i] for i in view.rows]
    confidence = np.array(view.confidence, dtype=float)
    correct = np.array([g == r[0] for g, r in zip(view.gold, view.ranked, strict=True)], dtype=bool)
    withheld = np.array([is_bare(s, thresholds or {axis: fixed_threshold}) for s in rows], dtype=bool)
    repeat = np.array([int(s.get("repeat", 0)) for s in rows], dtype=int)
    fold = np.array([int(s.get("fold", 0)) for s in rows], dtype=int)
    reported = np.array([report_source is None or s.get("source") == report_source for s in rows], dtype=bool)
    nested_mask = np.zeros(len(rows), dtype=bool)
    chosen = []
    for r in sorted(set(repeat.tolist())):
        if len(set(fold[repeat == r].tolist())) < 2:
            raise ValueError(f"{axis}: repetition {r} has a single test part (a temporal or transfer run); the "
                             "thresholds are re-chosen on the other folds, so give a cross-validation run")
        for f in sorted(set(fold[repeat == r].tolist())):
            here = (repeat == r) & (fold == f)
            others = (repeat == r) & (fold != f) & ~withheld
            t = utility_threshold(confidence[others], correct[others], cost)
            chosen.append(t)
            nested_mask[here] = confidence[here] >= t
    nested_mask &= ~withheld
    fixed_mask = np.array([s is not None for s in view.shown], dtype=bool)
    return AxisSelection(axis=axis, fixed_threshold=fixed_threshold, cost=round(cost, 3),
                         records=int(reported.sum()),
                         fixed=_shown(correct[reported], fixed_mask[reported], cost),
                         nested=_shown(correct[reported], nested_mask[reported], cost), chosen=chosen)


def select_run(results: dict, predictor: str, taxonomy: Taxonomy, report_source: str | None
               ) -> list[AxisSelection]:
    """Every shown axis of `predictor` in a stored run (its first evaluation), with the run's own thresholds."""
    evaluation = results["evaluations"][0]
    if predictor not in evaluation["predictors"]:
        raise ValueError(f"predictor {predictor!r} is not in this run; it has {sorted(evaluation['predictors'])}")
    thresholds = results["config"]["settings"]["thresholds"]
    samples = evaluation["predictors"][predictor]["samples"]
    return [select_axis(samples, axis, taxonomy, float(thresholds[axis]), report_source, thresholds)
            for axis in SHOWN_AXES]


def format_table(selections: Sequence[AxisSelection]) -> str:
    def cell(shown: Shown) -> str:
        accuracy = "-" if shown.accuracy is None else f"{shown.accuracy:.3f}"
        return f"{accuracy} @ {shown.coverage:.2f} ({shown.utility:+.3f})"

    lines = ["| axis | records | fixed threshold (cost) | fixed: shown accuracy @ coverage (utility) | "
             "nested | nested thresholds chosen (min-max, median) |", "|---|---|---|---|---|---|"]
    for s in selections:
        chosen = (f"{min(s.chosen):.2f}-{max(s.chosen):.2f}, {float(np.median(s.chosen)):.2f}" if s.chosen
                  else "- (no scored records)")
        lines.append(f"| {s.axis} | {s.records} | {s.fixed_threshold:.2f} ({s.cost:g}) | {cell(s.fixed)} | "
                     f"{cell(s.nested)} | {chosen} |")
    return "\n".join(lines)
