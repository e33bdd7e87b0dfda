from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from bot.core.domain import Case
from bot.core.settings import AXES
from bot.knowledge.taxonomy import Taxonomy
from bot.models.engine import make_queries
from bot.models.policy import Calibrator, decide, fit_calibrator, out_of_fold
from bot.models.predictors.base import AxisDistributions, Query, TrainingSet
from bot.models.predictors.knn import KnnPredictor
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import normalise


def test_an_axis_below_its_threshold_abstains_but_keeps_its_ranking() -> None:
    dist = {"a": 0.4, "b": 0.35, "c": 0.25}
    prediction = decide("symptom", dist, Calibrator(), threshold=0.5)
    assert prediction.label is None
    assert [label for label, _ in prediction.top] == ["a", "b", "c"]
    assert decide("symptom", dist, Calibrator(), threshold=0.4).label == "a"


def _calibrator(raw: list[float], correct: list[int], axis: str = "kind") -> Calibrator:
    model = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(raw, correct)
    return Calibrator(points={axis: (model.X_thresholds_, model.y_thresholds_)}, support={axis: len(raw)})


def test_calibration_maps_raw_scores_to_observed_accuracy_as_isotonic_regression_does() -> None:
    raw, correct = [0.2, 0.3, 0.4, 0.6, 0.7, 0.9, 0.95], [0, 1, 0, 1, 0, 1, 1]
    model = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(raw, correct)
    calibrator = _calibrator(raw, correct)
    for score in np.linspace(0.0, 1.0, 41):
        expected = min(max(float(model.predict([score])[0]), 1 / 8), 1 - 1 / 8)
        assert abs(calibrator.confidence("kind", float(score)) - expected) < 1e-12
    assert decide("kind", {"x": 0.4, "y": 0.3, "z": 0.3}, calibrator, 0.6).label is None


def test_confidence_never_claims_certainty_beyond_its_calibration_data() -> None:
    calibrator = _calibrator([0.2, 0.4, 0.9, 0.95], [0, 0, 1, 1])
    assert decide("kind", {"x": 0.99, "y": 0.01}, calibrator, 0.5).confidence == round(1 - 1 / 5, 4)
    assert decide("kind", {"x": 0.2, "y": 0.1, "z": 0.7 - 0.0}, calibrator, 0.5).confidence > 0
    uncalibrated = decide("stage", {"x": 1.0, "y": 0.0}, calibrator, 0.5).confidence
    assert 0 < uncalibrated < 1


def test_calibration_survives_a_round_trip_through_plain_arrays() -> None:
    calibrator = _calibrator([0.1, 0.5, 0.6, 0.8, 0.9], [0, 0, 1, 1, 1])
    again = Calibrator.restore(*calibrator.state())
    assert again.support == calibrator.support
    for score in (0.0, 0.55, 0.7, 1.0):
        assert again.confidence("kind", score) == calibrator.confidence("kind", score)


def _cases(taxonomy: Taxonomy, n: int) -> TrainingSet:
    """Made-up cases of two kinds on two orthogonal directions; root cause never established."""
    cases, vectors = [], []
    for i in range(n):
        question = i % 3 == 0
        labels = {"kind": "usage_question" if question else "bug_report", "root_cause": "unknown",
                  "stage": "training" if i < 10 else None}
        cases.append(Case(id=f"c#{i}", title=f"{'how to shard' if question else 'crash at step'} {i}", body="",
                          url=f"https://github.com/c/c/issues/{i}", labels=labels))
        vector = np.array([0.0 if question else 1.0, 1.0 if question else 0.0, 0.01 * i], dtype=np.float32)
        vectors.append(vector / np.linalg.norm(vector))
    return TrainingSet.build(CaseIndex(cases, np.vstack(vectors)), [c.title for c in cases], taxonomy,
                             use_silver=False)


def test_out_of_fold_predicts_every_case_once_with_a_model_fitted_on_all_the_others(taxonomy: Taxonomy) -> None:
    data = _cases(taxonomy, 20)
    fitted_on: list[set[str]] = []
    asked: list[tuple[int, list[int]]] = []  # (which fitted model, the rows it predicted)

    class Recording(KnnPredictor):
        def fit(self, data: TrainingSet) -> None:
            fitted_on.append({c.id for c in data.index.cases})
            super().fit(data)

    def queries_for(train: TrainingSet, rows: list[int]) -> list[Query]:
        asked.append((len(fitted_on) - 1, rows))
        issues = [normalise(data.index.cases[i]) for i in rows]
        return make_queries(train.index, issues, data.index.vectors[rows], 5)

    result = out_of_fold(lambda: Recording(k=3), data, queries_for, 4, 0)
    everyone = {c.id for c in data.index.cases}
    assert len(fitted_on) == 4 == len(asked)
    assert sorted(i for _, rows in asked for i in rows) == list(range(20))  # each case predicted once
    for model, rows in asked:
        held_out = {data.index.cases[i].id for i in rows}
        assert not held_out & fitted_on[model], "a case was predicted by a model that was fitted on it"
        assert fitted_on[model] == everyone - held_out
    # Each case gets its own fold's answer, in its own place: the kNN vote of its own kind.
    assert [max(d["kind"], key=d["kind"].__getitem__) if d else None for d in result] == \
        [c.labels["kind"] for c in data.index.cases]


def test_fit_calibrator_maps_top_scores_to_correctness_on_established_gold_labels_only(taxonomy: Taxonomy) -> None:
    data = _cases(taxonomy, 60)
    rng = np.random.default_rng(0)
    predictions: list[AxisDistributions | None] = []
    raw, correct = [], []
    for i, case in enumerate(data.index.cases):
        if i % 7 == 0:
            predictions.append(None)  # not predicted (not in any fold): left out
            continue
        top = float(rng.uniform(0.5, 0.99))
        guess = "bug_report" if rng.random() < top else "usage_question"  # right about as often as it is sure
        other = "usage_question" if guess == "bug_report" else "bug_report"
        dist = {axis: {"x": 0.6, "y": 0.4} for axis in AXES} | {"kind": {guess: top, other: 1 - top}}
        predictions.append(dist)
        raw.append(top)
        correct.append(1.0 if guess == case.labels["kind"] else 0.0)
    calibrator = fit_calibrator(data, predictions)
    model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, correct)
    assert 0 < sum(correct) < len(correct)
    assert calibrator.support["kind"] == len(raw) == 60 - 9
    np.testing.assert_allclose(calibrator.points["kind"][0], model.X_thresholds_)
    np.testing.assert_allclose(calibrator.points["kind"][1], model.y_thresholds_)
    # root_cause "unknown" is not established: nothing to calibrate on; stage: 10 labelled, fewer than 20.
    assert calibrator.support["root_cause"] == 0 and "root_cause" not in calibrator.points
    assert calibrator.support["stage"] == 8 and "stage" not in calibrator.points  # cases 0 and 7 not predicted
    for score in (0.5, 0.7, 0.9):
        expected = min(max(float(model.predict([score])[0]), 1 / 52), 1 - 1 / 52)
        assert calibrator.confidence("kind", score) == expected
