"""Predictors that exist to answer a benchmark question, not to ship.

`linear-without-r3`: `linear` fitted on the case base minus round 3 (`ddl-dev-r3.jsonl`), to show what adding
round 3 does to the natural mix (`ddl-dev.jsonl`) and to the enriched classes, side by side in one run.
"""

from __future__ import annotations

from bot.core.settings import Settings
from bot.models.predictors.base import Arrays, AxisDistributions, Meta, Predictor, Query, State, TrainingSet, register
from bot.models.predictors.linear import LinearPredictor

ROUND_3 = "ddl-dev-r3.jsonl"


class WithoutSource(Predictor):
    """Another predictor fitted only on the cases that do not come from the file `source`."""

    def __init__(self, inner: Predictor, source: str, name: str) -> None:
        self.inner, self.source, self.name = inner, source, name

    def fit(self, data: TrainingSet) -> None:
        keep = [i for i, case in enumerate(data.index.cases) if not case.source_file.endswith(self.source)]
        self.inner.fit(data.subset(keep))

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        return self.inner.predict_proba(queries)

    def state(self) -> State:
        return self.inner.state()

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        self.inner.restore(arrays, meta, data)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "without_source": self.source, "inner": self.inner.describe()}


@register("linear-without-r3")
def _linear_without_r3(settings: Settings) -> Predictor:
    return WithoutSource(LinearPredictor(), ROUND_3, "linear-without-r3")

