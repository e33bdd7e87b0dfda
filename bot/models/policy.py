"""Calibrated confidence per axis and the abstention policy, in this module only: below the axis threshold say
"not sure", and for a report too bare to triage (`needs_details`) show no label at all.

The engine decides with its own thresholds; the repository's thresholds (`apply_thresholds`) and the blend of
its labelled memory (`bot/memory/overrides.py`) decide again through `shown_label`, so neither can pick a label
from the ranking that the engine withheld for want of details.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import KFold

from bot.core.domain import AxisPrediction, TriageResult
from bot.core.settings import AXES
from bot.models.grouping import assign_folds
from bot.models.predictors.base import AxisDistributions, Distribution, Predictor, Query, TrainingSet

TOP_N = 5
CLIP_UNCALIBRATED = 0.01  # an axis without calibration data still never claims 0% or 100%


@dataclass
class Calibrator:
    """Maps a predictor's top probability on an axis to the chance that its top label is right.

    Fitted by isotonic regression on out-of-fold predictions over the case base's gold labels, and kept as
    the regression's step points (piecewise-linear interpolation, as `IsotonicRegression.predict` does), so
    a shipped pack stores plain arrays. A confidence never reaches 0 or 1: with n calibration points the
    data supports at most 1 - 1/(n+1) (and at least 1/(n+1)).
    """

    points: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    support: dict[str, int] = field(default_factory=dict)

    def confidence(self, axis: str, raw: float) -> float:
        xs_ys = self.points.get(axis)
        value = float(np.interp(raw, xs_ys[0], xs_ys[1])) if xs_ys is not None else raw
        bound = 1.0 / (self.support.get(axis, 0) + 1) if axis in self.points else CLIP_UNCALIBRATED
        return min(max(value, bound), 1.0 - bound)

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        arrays: dict[str, np.ndarray] = {}
        for axis, (xs, ys) in self.points.items():
            arrays[f"{axis}.x"], arrays[f"{axis}.y"] = xs, ys
        return arrays, {"support": dict(self.support), "axes": sorted(self.points)}

    @classmethod
    def restore(cls, arrays: dict[str, np.ndarray], meta: dict[str, object]) -> Calibrator:
        support = meta.get("support", {})
        axes = meta.get("axes", [])
        if not isinstance(support, dict) or not isinstance(axes, list):
            raise ValueError("calibration metadata must hold 'support' (object) and 'axes' (list)")
        points = {str(a): (arrays[f"{a}.x"], arrays[f"{a}.y"]) for a in axes}
        return cls(points=points, support={str(k): int(v) for k, v in support.items()})


def top_labels(dist: Distribution, n: int = TOP_N) -> list[tuple[str, float]]:
    ranked = sorted(dist.items(), key=lambda item: (-item[1], item[0]))
    return [(label, round(p, 4)) for label, p in ranked[:max(n, 3)]]


def shown_label(top: list[tuple[str, float]], confidence: float, threshold: float, *,
                needs_details: bool = False) -> str | None:
    """The one abstention rule: the head of the ranking at or above the threshold; none for a bare report."""
    if needs_details or not top or confidence < threshold:
        return None
    return top[0][0]


def decide(axis: str, dist: Distribution, calibrator: Calibrator, threshold: float,
           raw: float | None = None, *, needs_details: bool = False) -> AxisPrediction:
    """The label to show (None to abstain), its calibrated confidence and the ranking head.

    `raw` is the score the calibrator was fitted on, when it is not the top probability (the llm predictor).
    """
    top = top_labels(dist)
    score = raw if raw is not None else (top[0][1] if top else 0.0)
    confidence = round(calibrator.confidence(axis, score), 4) if top else 0.0
    return AxisPrediction(label=shown_label(top, confidence, threshold, needs_details=needs_details),
                          confidence=confidence, top=top)


def apply_thresholds(result: TriageResult, thresholds: dict[str, float]) -> TriageResult:
    """The result with a repository's own thresholds deciding which axes are shown (never on a bare report)."""
    if not thresholds:
        return result
    predictions = dict(result.predictions)
    for axis, threshold in thresholds.items():
        pred = predictions[axis]
        label = shown_label(pred.top, pred.confidence, threshold, needs_details=result.needs_details)
        predictions[axis] = AxisPrediction(label=label, confidence=pred.confidence, top=pred.top)
    return result.model_copy(update={"predictions": predictions})


def withhold_for_details(result: TriageResult) -> TriageResult:
    """A report too bare to triage: every label withdrawn (the ranking stays), marked `needs_details`."""
    predictions = {axis: p.model_copy(update={"label": None}) for axis, p in result.predictions.items()}
    return result.model_copy(update={"predictions": predictions, "needs_details": True})


def out_of_fold(make: Callable[[], Predictor], data: TrainingSet,
                queries_for: Callable[[TrainingSet, list[int]], list[Query]], folds: int, seed: int,
                groups: Sequence[Sequence[int]] | None = None) -> list[AxisDistributions | None]:
    """Each case's distributions from a predictor trained without its fold (None where not predicted).

    `groups` (linked threads and near-duplicate texts, `bot/models/grouping.py`) each stay in one fold, so that no copy
    of a case teaches the model that predicts it; without them, a plain shuffled k-fold."""
    result: list[AxisDistributions | None] = [None] * len(data.texts)
    for train_idx, test_idx in _fold_rows(len(data.texts), folds, seed, groups):
        predictor = make()
        train = data.subset(train_idx)
        predictor.fit(train)
        outputs = predictor.predict_proba(queries_for(train, [int(i) for i in test_idx]))
        for i, dist in zip(test_idx, outputs, strict=True):
            result[int(i)] = dist
    return result


def _fold_rows(count: int, folds: int, seed: int, groups: Sequence[Sequence[int]] | None
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    if groups is None:
        return list(KFold(n_splits=folds, shuffle=True, random_state=seed).split(np.arange(count)))
    fold_of = np.array(assign_folds(groups, folds, seed))
    return [(np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)) for f in range(folds)]


def fit_calibrator(data: TrainingSet, predictions: list[AxisDistributions | None]) -> Calibrator:
    """Isotonic maps per axis from top probability to correctness, on cases with an established gold label."""
    calibrator = Calibrator()
    for axis in AXES:
        raw, correct = [], []
        for case, dist in zip(data.index.cases, predictions, strict=True):
            gold = case.labels.get(axis)
            if dist is None or not data.taxonomy.is_established(axis, gold):
                continue
            label, p = max(dist[axis].items(), key=lambda item: item[1])
            raw.append(p)
            correct.append(1.0 if label == gold else 0.0)
        calibrator.support[axis] = len(raw)
        if len(raw) >= 20 and 0 < sum(correct) < len(correct):
            model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip", increasing=True)
            model.fit(raw, correct)
            calibrator.points[axis] = (np.asarray(model.X_thresholds_, dtype=np.float64),
                                       np.asarray(model.y_thresholds_, dtype=np.float64))
    return calibrator
