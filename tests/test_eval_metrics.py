"""The benchmark metrics, pinned on small hand-made cases (no model, no real data)."""

from __future__ import annotations

import random

import pytest
from sklearn.metrics import f1_score

from bot.knowledge.taxonomy import load_taxonomy
from eval.metrics import (
    accuracy_coverage_curve,
    area_under_curve,
    bootstrap_intervals,
    confusion_matrix,
    coverage_precision,
    macro_f1,
    per_class,
    score_axis,
    split_established,
    top_k_accuracy,
)
from eval.scoring import Answer, Sample, score_samples

# gold a a a b b c / predicted a a b b c c:
#   a: tp 2, fp 0, fn 1 -> F1 4/5;  b: tp 1, fp 1, fn 1 -> 1/2;  c: tp 1, fp 1, fn 0 -> 2/3
GOLD = ["a", "a", "a", "b", "b", "c"]
PREDICTED = ["a", "a", "b", "b", "c", "c"]
EXPECTED_MACRO_F1 = (4 / 5 + 1 / 2 + 2 / 3) / 3


def test_known_confusion_matrix_gives_known_macro_f1() -> None:
    assert confusion_matrix(GOLD, PREDICTED, ["a", "b", "c"]).tolist() == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert macro_f1(GOLD, PREDICTED) == pytest.approx(EXPECTED_MACRO_F1)


def test_a_class_only_predicted_counts_with_f1_zero() -> None:
    # a: tp 1, fn 1 -> 2/3; b never gold but predicted -> 0; macro over {a, b}
    assert macro_f1(["a", "a"], ["a", "b"]) == pytest.approx((2 / 3 + 0) / 2)


def test_macro_f1_equals_sklearn_over_classes_in_gold_or_predictions() -> None:
    rng = random.Random(7)
    for _ in range(20):
        gold = [rng.choice("abcdef") for _ in range(40)]
        predicted = [g if rng.random() < 0.5 else rng.choice("abcdefg") for g in gold]
        labels = sorted(set(gold) | set(predicted))
        expected = f1_score(gold, predicted, labels=labels, average="macro", zero_division=0)
        assert macro_f1(gold, predicted) == pytest.approx(expected)


def test_bootstrap_interval_contains_the_point_estimate() -> None:
    rng = random.Random(3)
    gold = [rng.choice("abcd") for _ in range(120)]
    predicted = [g if rng.random() < 0.7 else rng.choice("abcd") for g in gold]
    intervals = bootstrap_intervals(gold, predicted, seed=0)
    low, high = intervals["macro_f1"]
    assert low <= macro_f1(gold, predicted) <= high
    low, high = intervals["accuracy"]
    assert low <= sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold) <= high
    assert high - low > 0


def test_bootstrap_is_seeded() -> None:
    assert bootstrap_intervals(GOLD * 5, PREDICTED * 5, seed=1) == bootstrap_intervals(GOLD * 5, PREDICTED * 5, seed=1)
    assert bootstrap_intervals(GOLD * 5, PREDICTED * 5, seed=1) != bootstrap_intervals(GOLD * 5, PREDICTED * 5, seed=2)


def test_perfect_predictions_have_a_degenerate_interval_at_one() -> None:
    assert bootstrap_intervals(GOLD, GOLD, seed=0) == {"accuracy": (1.0, 1.0), "macro_f1": (1.0, 1.0)}


def test_top3_accuracy_counts_gold_within_the_first_three() -> None:
    ranked = [["x", "y", "a"], ["a", "x", "y"], ["x", "y", "z", "b"]]
    assert top_k_accuracy(["a", "a", "b"], ranked) == pytest.approx(2 / 3)


def test_coverage_and_precision_count_abstentions() -> None:
    coverage, precision = coverage_precision(["a", "b", "c", "d"], ["a", None, "x", None])
    assert coverage == 0.5
    assert precision == 0.5
    assert coverage_precision(["a"], [None]) == (0.0, None)


def test_accuracy_coverage_curve_lets_ties_enter_together() -> None:
    curve = accuracy_coverage_curve(["a", "b", "c", "d"], ["a", "x", "c", "x"], [0.9, 0.9, 0.5, 0.1])
    assert curve == [{"threshold": 0.9, "coverage": 0.5, "accuracy": 0.5},
                     {"threshold": 0.5, "coverage": 0.75, "accuracy": pytest.approx(0.6667)},
                     {"threshold": 0.1, "coverage": 1.0, "accuracy": 0.5}]
    assert area_under_curve(curve) == pytest.approx(0.5 * 0.5 + 0.25 * 0.6667 + 0.25 * 0.5)


def test_curve_of_a_confident_right_predictor_stays_at_one_then_falls() -> None:
    curve = accuracy_coverage_curve(["a", "b"], ["a", "x"], [0.8, 0.2])
    assert [p["accuracy"] for p in curve] == [1.0, 0.5]


def test_per_class_precision_recall_f1_support() -> None:
    table = per_class(GOLD, PREDICTED)
    assert table["a"] == {"precision": 1.0, "recall": pytest.approx(0.6667), "f1": 0.8, "support": 3}
    assert table["c"] == {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(0.6667), "support": 1}


def test_skipped_records_are_counted_by_reason() -> None:
    taxonomy = load_taxonomy("ddl-v1")
    gold = [None, "unknown", "api_misuse", "unknown", "none"]
    rows, skipped = split_established(gold, lambda v: taxonomy.is_established("root_cause", v))
    assert rows == [2, 4]
    assert skipped == {"missing": 1, "unknown": 2}


def test_score_axis_reports_every_metric() -> None:
    ranked = [[p, "zz", "yy"] for p in PREDICTED]
    shown = [p if i % 2 == 0 else None for i, p in enumerate(PREDICTED)]
    scores = score_axis(GOLD, ranked, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], shown, seed=0, resamples=200)
    assert scores["n"] == 6
    assert scores["macro_f1"] == pytest.approx(EXPECTED_MACRO_F1, abs=1e-4)
    assert scores["accuracy"] == pytest.approx(4 / 6, abs=1e-4)
    assert scores["top3_accuracy"] == pytest.approx(4 / 6, abs=1e-4)
    assert scores["coverage_at_threshold"] == 0.5
    assert scores["confusion"] == {"labels": ["a", "b", "c"], "matrix": [[2, 1, 0], [0, 1, 1], [0, 0, 1]]}


def _sample(i: int, gold: str | None, predicted: str, label: str | None = None) -> Sample:
    answer = Answer(label=label, confidence=0.5, top=[(predicted, 0.5), ("none", 0.3), ("api_misuse", 0.2)])
    return Sample(id=f"s{i}", fold=0, input_sha256="0" * 64,
                  gold={"kind": "bug_report", "stage": "training", "symptom": "hang_timeout",
                        "root_cause": gold, "fix_pattern": "unresolved"},
                  predicted={axis: answer for axis in ("kind", "stage", "symptom", "root_cause", "fix_pattern")},
                  fallback=None)


def test_scoring_skips_unestablished_gold_on_that_axis_only_and_counts_it() -> None:
    samples = [_sample(0, "api_misuse", "api_misuse"), _sample(1, "unknown", "api_misuse"),
               _sample(2, None, "none"), _sample(3, "user_code_error", "api_misuse")]
    scores = score_samples(samples, load_taxonomy("ddl-v1"), {"root_cause": 0.5}, seed=0, resamples=100)
    assert scores["root_cause"]["n"] == 2
    assert scores["root_cause"]["skipped"] == {"missing": 1, "unknown": 1}
    assert scores["root_cause"]["accuracy"] == 0.5
    assert scores["kind"]["n"] == 4 and scores["kind"]["skipped_total"] == 0
    assert scores["fix_pattern"] == {"threshold": None, "skipped": {"unresolved": 4}, "skipped_total": 4, "n": 0}
