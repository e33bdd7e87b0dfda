"""Similarity-weighted vote of the nearest labelled cases."""

from __future__ import annotations

from bot.core.settings import AXES, Settings
from bot.models.predictors.base import (
    Arrays,
    AxisDistributions,
    Meta,
    Predictor,
    Query,
    State,
    TrainingSet,
    label_priors,
    normalise_distribution,
    register,
)


class KnnPredictor(Predictor):
    """p(label) grows with sim**power summed over the neighbours that carry it, smoothed by the prior."""

    name = "knn"

    def __init__(self, k: int = 10, power: float = 4.0, prior_weight: float = 0.05) -> None:
        self.k, self.power, self.prior_weight = k, power, prior_weight

    def fit(self, data: TrainingSet) -> None:
        self._data = data
        self._priors = label_priors(data)

    def bind(self, data: TrainingSet) -> None:
        self._data = data

    def state(self) -> State:
        return {}, {"config": self.describe(), "priors": self._priors}

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        self._data = data
        self._priors = {axis: {str(k): float(v) for k, v in dist.items()} for axis, dist in meta["priors"].items()}

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        return [self._vote(q) for q in queries]

    def _vote(self, query: Query) -> AxisDistributions:
        out: AxisDistributions = {}
        for axis in AXES:
            targets = self._data.targets[axis]
            scores: dict[str, float] = {}
            used = 0
            for j, sim in query.hits:
                label = targets[j]
                if label is None:
                    continue
                scores[label] = scores.get(label, 0.0) + max(sim, 0.0) ** self.power
                used += 1
                if used >= self.k:
                    break
            total = sum(scores.values()) or 1.0
            mixed = {label: (1 - self.prior_weight) * scores.get(label, 0.0) / total + self.prior_weight * p
                     for label, p in self._priors[axis].items()}
            out[axis] = normalise_distribution(mixed, self._data.taxonomy.predictable(axis))
        return out

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "k": self.k, "power": self.power, "prior_weight": self.prior_weight}


@register("knn")
def _knn(settings: Settings) -> Predictor:
    return KnnPredictor(k=settings.neighbours)
