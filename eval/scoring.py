"""From the engine's answers to per-sample records, and from those records to per-axis metrics.

Which records an axis is scored on is decided here, once, for every table: records whose gold value is not
established are skipped; root cause is scored on bug reports only, with gold `none` reported apart (a
feature request has no cause, and counting it rewards always saying `none`); root cause and fix pattern are
scored on issues only (the bot never triages a pull request, and a fix PR shows its own resolution); in transfer,
records whose gold label the case base never holds are skipped, and rankings keep only labels both sides can hold.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import numpy as np

from bot.core.domain import Case, TriageResult
from bot.core.settings import AXES
from bot.knowledge.taxonomy import Taxonomy
from eval.calibration import brier_score, expected_calibration_error, reliability_bins
from eval.metrics import (
    MISSING,
    accuracy,
    coverage_precision,
    macro_f1,
    precision_at_coverage,
    score_axis,
    top_k_accuracy,
)

BUG_REPORT_ONLY = {"root_cause"}
ISSUES_ONLY = {"root_cause", "fix_pattern"}
PULL_REQUEST = "pull request (never triaged)"
NOT_A_BUG_REPORT = "not a bug report"
NONE_APART = "none (reported apart)"
UNHELD_LABEL = "label the case base never holds"
MIN_GOLD_CLASSES = 2  # an axis with one gold class measures nothing (every majority guess is right)


class Answer(TypedDict):
    label: str | None  # None: the engine abstained at the configured threshold
    confidence: float
    top: list[tuple[str, float]]


class Sample(TypedDict):
    id: str
    fold: int
    repeat: int
    source: str  # the gold file the record came from
    type: str | None  # issue, pull_request, question
    repo: str | None
    input_sha256: str  # sha256 of the normalised text the engine embedded
    gold: dict[str, str | None]
    predicted: dict[str, Answer]
    fallback: str | None
    resolution_visible: bool | None  # ddl-dev: the annotator saw the resolution in the stored window
    needs_details: NotRequired[bool]  # a report too bare to triage: every label withheld (older runs lack it)


def sample_record(case: Case, result: TriageResult, fold: int, input_sha256: str, repeat: int = 0) -> Sample:
    """One test record as results.json keeps it: gold, shown label, confidence and ranking per axis."""
    return Sample(
        id=case.id, fold=fold, repeat=repeat, source=case.source_file.rsplit("/", 1)[-1], type=case.type,
        repo=case.repo, input_sha256=input_sha256,
        gold={axis: case.labels.get(axis) for axis in AXES},
        predicted={axis: Answer(label=p.label, confidence=p.confidence, top=list(p.top))
                   for axis, p in result.predictions.items()},
        fallback=result.fallback,
        resolution_visible=_resolution_visible(case),
        needs_details=result.needs_details,
    )


def _resolution_visible(case: Case) -> bool | None:
    seen = (case.annotation or {}).get("resolution_visible")
    return seen if isinstance(seen, bool) else None


@dataclass
class AxisView:
    """The scored records of one axis: gold, ranking (restricted to `allowed` labels), confidence, shown label."""

    rows: list[int]
    gold: list[str]
    ranked: list[list[str]]
    confidence: list[float]
    shown: list[str | None]
    skipped: dict[str, int]

    @property
    def predicted(self) -> list[str]:
        return [r[0] for r in self.ranked]


def axis_view(samples: Sequence[Sample], axis: str, taxonomy: Taxonomy,
              allowed: Collection[str] | None = None) -> AxisView:
    """The records `axis` is scored on (see the module's rules) and what the predictor said about them."""
    view = AxisView([], [], [], [], [], {})
    skipped: Counter[str] = Counter()
    for i, sample in enumerate(samples):
        gold = sample["gold"].get(axis)
        if not taxonomy.is_established(axis, gold):
            skipped[MISSING if gold is None else str(gold)] += 1
        elif axis in ISSUES_ONLY and sample.get("type") == "pull_request":
            skipped[PULL_REQUEST] += 1
        elif axis in BUG_REPORT_ONLY and sample["gold"].get("kind") != "bug_report":
            skipped[NOT_A_BUG_REPORT] += 1
        elif axis in BUG_REPORT_ONLY and gold == "none":
            skipped[NONE_APART] += 1
        elif allowed is not None and gold not in allowed:
            skipped[UNHELD_LABEL] += 1
        else:
            answer = sample["predicted"][axis]
            ranked = [str(t[0]) for t in answer["top"]]
            if allowed is not None:
                ranked = [label for label in ranked if label in allowed] or ranked[:1]
            view.rows.append(i)
            view.gold.append(str(gold))
            view.ranked.append(ranked)
            view.confidence.append(float(answer["confidence"]))
            view.shown.append(answer["label"])
    view.skipped = dict(sorted(skipped.items()))
    return view


def by_repeat(samples: Sequence[Sample]) -> dict[int, list[Sample]]:
    groups: dict[int, list[Sample]] = defaultdict(list)
    for sample in samples:
        groups[sample.get("repeat", 0)].append(sample)
    return dict(sorted(groups.items()))


def light_metrics(view: AxisView) -> dict[str, float]:
    """The metrics reported as mean and spread over repetitions."""
    correct = [g == p for g, p in zip(view.gold, view.predicted, strict=True)]
    at_60 = precision_at_coverage(view.gold, view.predicted, view.confidence, 0.6)
    coverage, shown_accuracy = coverage_precision(view.gold, view.shown)
    return {"accuracy": accuracy(view.gold, view.predicted), "macro_f1": macro_f1(view.gold, view.predicted),
            "shown_accuracy": float("nan") if shown_accuracy is None else shown_accuracy, "coverage": coverage,
            "top3_accuracy": top_k_accuracy(view.gold, view.ranked),
            "ece": expected_calibration_error(view.confidence, correct),
            "brier": brier_score(view.confidence, correct),
            "precision_at_60_coverage": float("nan") if at_60 is None else at_60}


def score_samples(samples: Sequence[Sample], taxonomy: Taxonomy, thresholds: dict[str, float], *, seed: int,
                  resamples: int, allowed: Mapping[str, Collection[str]] | None = None
                  ) -> dict[str, dict[str, object]]:
    """Metrics per axis: full detail on the first repetition, mean and spread of the main ones over all."""
    repeats = by_repeat(samples)
    first = next(iter(repeats.values()), [])
    scores: dict[str, dict[str, object]] = {}
    for axis in AXES:
        labels = None if allowed is None else allowed.get(axis)
        view = axis_view(first, axis, taxonomy, labels)
        base: dict[str, object] = {"threshold": thresholds.get(axis), "skipped": view.skipped,
                                   "skipped_total": sum(view.skipped.values())}
        gold_classes = len(set(view.gold))
        if allowed is not None and 0 < gold_classes < MIN_GOLD_CLASSES:
            scores[axis] = {**base, "n": 0, "not_scored": f"{gold_classes} gold class on the scored records"}
            continue
        metrics = score_axis(view.gold, view.ranked, view.confidence, view.shown, seed=seed, resamples=resamples)
        if not view.gold:
            scores[axis] = {**base, **metrics}
            continue
        per_repeat = [light_metrics(axis_view(r, axis, taxonomy, labels)) for r in repeats.values()]
        spread = {name: [round(m[name], 4) for m in per_repeat] for name in per_repeat[0]}
        correct = [g == p for g, p in zip(view.gold, view.predicted, strict=True)]
        scores[axis] = {
            **base, **metrics, "repeats": len(per_repeat), "per_repeat": spread,
            "errors": error_counts([axis_view(r, axis, taxonomy, labels) for r in repeats.values()]),
            "mean": {k: round(_mean_of_defined(v), 4) for k, v in spread.items()},
            "sd": {k: round(_sd_of_defined(v), 4) for k, v in spread.items()},
            "reliability": reliability_bins(view.confidence, correct),
        }
        if axis in BUG_REPORT_ONLY:
            scores[axis]["none_apart"] = none_apart(first, axis)
    return scores


def error_counts(views: Sequence[AxisView]) -> list[tuple[str, str, int]]:
    """(gold, predicted top label, count) of every wrong answer, summed over the repetitions, most frequent first."""
    counts = Counter((g, p) for view in views for g, p in zip(view.gold, view.predicted, strict=True) if g != p)
    return [(gold, predicted, n) for (gold, predicted), n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]


def none_apart(samples: Sequence[Sample], axis: str) -> dict[str, object]:
    """Records whose gold `axis` is `none` (any kind): how many, and how often the predictor said `none`."""
    rows = [s for s in samples if s["gold"].get(axis) == "none"]
    said = sum(1 for s in rows if s["predicted"][axis]["top"] and s["predicted"][axis]["top"][0][0] == "none")
    return {"n": len(rows), "predicted_none": said}


def _mean_of_defined(values: Sequence[float]) -> float:
    """The mean over the repetitions where the metric is defined (NaN, without a warning, when it never is:
    e.g. shown accuracy when no repetition showed a label)."""
    defined = [v for v in values if not math.isnan(v)]
    return float(np.mean(defined)) if defined else math.nan


def _sd_of_defined(values: Sequence[float]) -> float:
    """The sample standard deviation over the repetitions where the metric is defined; 0.0 with fewer than two."""
    defined = [v for v in values if not math.isnan(v)]
    return float(np.std(defined, ddof=1)) if len(defined) > 1 else 0.0
