from __future__ import annotations

from sklearn.isotonic import IsotonicRegression

from bot.policy import Calibrator, decide


def test_an_axis_below_its_threshold_abstains_but_keeps_its_ranking() -> None:
    dist = {"a": 0.4, "b": 0.35, "c": 0.25}
    prediction = decide("symptom", dist, Calibrator(), threshold=0.5)
    assert prediction.label is None
    assert [label for label, _ in prediction.top] == ["a", "b", "c"]
    assert decide("symptom", dist, Calibrator(), threshold=0.4).label == "a"


def test_calibration_maps_raw_scores_to_observed_accuracy() -> None:
    model = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit([0.2, 0.4, 0.9, 0.95], [0, 0, 1, 1])
    calibrator = Calibrator(models={"kind": model})
    assert decide("kind", {"x": 0.9, "y": 0.1}, calibrator, 0.5).confidence == 1.0
    assert decide("kind", {"x": 0.4, "y": 0.3, "z": 0.3}, calibrator, 0.5).label is None
