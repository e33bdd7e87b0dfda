"""From the engine's answers to per-sample records, and from those records to per-axis metrics."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TypedDict

from bot.domain import Case, TriageResult
from bot.settings import AXES
from bot.taxonomy import Taxonomy
from eval.metrics import score_axis, split_established


class Answer(TypedDict):
    label: str | None  # None: the engine abstained at the configured threshold
    confidence: float
    top: list[tuple[str, float]]


class Sample(TypedDict):
    id: str
    fold: int
    input_sha256: str  # sha256 of the normalised text the engine embedded
    gold: dict[str, str | None]
    predicted: dict[str, Answer]
    fallback: str | None


def sample_record(case: Case, result: TriageResult, fold: int, input_sha256: str) -> Sample:
    """One test record as results.json keeps it: gold, shown label, confidence and ranking per axis."""
    return Sample(
        id=case.id, fold=fold, input_sha256=input_sha256,
        gold={axis: case.labels.get(axis) for axis in AXES},
        predicted={axis: Answer(label=p.label, confidence=p.confidence, top=list(p.top))
                   for axis, p in result.predictions.items()},
        fallback=result.fallback,
    )


def score_samples(samples: Sequence[Sample], taxonomy: Taxonomy, thresholds: dict[str, float], *, seed: int,
                  resamples: int) -> dict[str, dict[str, object]]:
    """Metrics per axis over the records whose gold value is established; the others are counted."""
    scores: dict[str, dict[str, object]] = {}
    for axis in AXES:
        gold_all = [s["gold"].get(axis) for s in samples]
        rows, skipped = split_established(gold_all, partial(taxonomy.is_established, axis))
        answers = [samples[i]["predicted"][axis] for i in rows]
        metrics = score_axis([str(gold_all[i]) for i in rows], [[t[0] for t in a["top"]] for a in answers],
                             [a["confidence"] for a in answers], [a["label"] for a in answers],
                             seed=seed, resamples=resamples)
        scores[axis] = {"threshold": thresholds.get(axis), "skipped": skipped,
                        "skipped_total": sum(skipped.values()), **metrics}
    return scores
