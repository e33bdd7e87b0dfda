"""A ddl-triage predictor in its own package: the label of the nearest case, on every axis."""

from bot.core.settings import AXES, Settings
from bot.models.predictors import Predictor, Query, TrainingSet
from bot.models.predictors.base import AxisDistributions, normalise_distribution


class NearestCase(Predictor):
    name = "nearest-case"

    def fit(self, data: TrainingSet) -> None:
        self.data = data

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        def vote(q: Query, axis: str) -> dict[str, float]:
            labels = [self.data.targets[axis][j] for j, _ in q.hits if self.data.targets[axis][j]]
            return normalise_distribution({labels[0]: 1.0} if labels else {}, self.data.taxonomy.predictable(axis))
        return [{axis: vote(q, axis) for axis in AXES} for q in queries]


def make(settings: Settings) -> Predictor:
    return NearestCase()
