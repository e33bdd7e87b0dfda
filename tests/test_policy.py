from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from bot.policy import Calibrator, decide


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
