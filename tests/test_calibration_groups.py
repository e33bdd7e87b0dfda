"""The engine's calibration folds keep linked and near-duplicate cases together, as the benchmark's folds do:
a twin of a case never teaches the model whose out-of-fold score calibrates that case."""

from __future__ import annotations

import numpy as np

from bot.core.domain import Case
from bot.knowledge.taxonomy import Taxonomy
from bot.models.engine import make_queries
from bot.models.grouping import near_duplicate_groups
from bot.models.policy import out_of_fold
from bot.models.predictors.base import Query, TrainingSet
from bot.models.predictors.knn import KnnPredictor
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import normalise


def _twins(taxonomy: Taxonomy) -> TrainingSet:
    """Ten pairs of cases with identical embeddings, each pair with a symptom no other pair has."""
    symptoms = list(taxonomy.predictable("symptom"))[:10]
    rng = np.random.default_rng(3)
    base = rng.normal(size=(10, 32)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    vectors = np.repeat(base, 2, axis=0)
    cases = [Case(id=f"acme/trainer#{i}", title=f"report {i}", body=f"text of report {i}",
                  labels={"symptom": symptoms[i // 2]}) for i in range(20)]
    texts = [normalise(c).text for c in cases]
    return TrainingSet.build(CaseIndex(cases, vectors), texts, taxonomy, use_silver=False)


def _own_label_on_top(data: TrainingSet, groups: list[list[int]] | None) -> int:
    def queries_for(train: TrainingSet, rows: list[int]) -> list[Query]:
        return make_queries(train.index, [normalise(data.index.cases[i]) for i in rows], data.index.vectors[rows], 5)

    predicted = out_of_fold(lambda: KnnPredictor(k=3), data, queries_for, folds=5, seed=0, groups=groups)
    hits = 0
    for case, dist in zip(data.index.cases, predicted, strict=True):
        assert dist is not None
        hits += max(dist["symptom"], key=dist["symptom"].__getitem__) == case.labels["symptom"]
    return hits


def test_grouped_calibration_folds_never_let_a_twin_vote(taxonomy: Taxonomy) -> None:
    data = _twins(taxonomy)
    groups = near_duplicate_groups(data.index.vectors, 0.95)
    assert sorted(len(g) for g in groups) == [2] * 10
    assert _own_label_on_top(data, groups) == 0  # the only case that carries the label is held out with it
    assert _own_label_on_top(data, None) > 0  # a plain k-fold splits twins: one votes for the other
