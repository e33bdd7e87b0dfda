"""Paired comparisons, calibration error and the scoring rules (root cause on bug reports, transfer labels)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.core.settings import AXES
from bot.knowledge.taxonomy import load_taxonomy
from eval.calibration import brier_score, expected_calibration_error, reliability_bins
from eval.cli import app
from eval.paired import compare_axis, mcnemar_p
from eval.scoring import Answer, Sample, _mean_of_defined, _sd_of_defined, score_samples

TAXONOMY = load_taxonomy("ddl-v1")
SYMPTOMS = ["out_of_memory", "hang_timeout", "device_error", "import_error"]


def sample(i: int, gold: dict[str, str], predicted: dict[str, str], repeat: int = 0, confidence: float = 0.7
           ) -> Sample:
    answers = {axis: Answer(label=None, confidence=confidence, top=[(predicted.get(axis, "none"), 0.7)])
               for axis in AXES}
    return Sample(id=f"s{i}", fold=0, repeat=repeat, source="made-up.jsonl", type="issue", repo="made/up",
                  input_sha256="0" * 64, gold={axis: gold.get(axis) for axis in AXES}, predicted=answers,
                  fallback=None)


def run(correct_every: int, repeat: int = 0) -> list[Sample]:
    """80 records; the predictor is right on all but every `correct_every`-th."""
    out = []
    for i in range(80):
        gold = SYMPTOMS[i % 4]
        wrong = correct_every and i % correct_every == 0
        out.append(sample(i, {"symptom": gold}, {"symptom": SYMPTOMS[(i + 1) % 4] if wrong else gold}, repeat))
    return out


def test_a_clearly_better_predictor_has_a_paired_interval_above_zero() -> None:
    better = run(10) + run(10, repeat=1)
    worse = run(2) + run(2, repeat=1)
    result = compare_axis(better, worse, "symptom", TAXONOMY, seed=0, resamples=500)
    assert result is not None and result["repeats"] == 2 and result["n"] == 80
    assert result["accuracy_diff"] == 0.4
    assert result["accuracy_diff_ci"][0] > 0 and result["macro_f1_diff_ci"][0] > 0
    assert result["mcnemar_p_max"] < 0.001


def test_identical_predictors_differ_by_exactly_zero() -> None:
    result = compare_axis(run(3), run(3), "symptom", TAXONOMY, seed=0, resamples=200)
    assert result is not None
    assert result["accuracy_diff"] == 0 and result["accuracy_diff_ci"] == [0, 0] and result["mcnemar_p_max"] == 1


def test_mcnemar_counts_only_discordant_records() -> None:
    assert mcnemar_p([True] * 10, [True] * 10) == 1.0
    assert mcnemar_p([True] * 10 + [False] * 10, [True] * 10 + [True] * 10) < 0.01


def test_calibration_error_is_zero_when_confidence_matches_accuracy() -> None:
    confidence = [0.75] * 4 + [0.25] * 4
    correct = [True, True, True, False, True, False, False, False]
    assert expected_calibration_error(confidence, correct) == 0
    assert abs(expected_calibration_error([0.9] * 10, [False] * 10) - 0.9) < 1e-9
    assert abs(brier_score([1.0, 0.0], [True, True]) - 0.5) < 1e-9
    assert [b["n"] for b in reliability_bins(confidence, correct)] == [4, 4]


def test_root_cause_is_scored_on_bug_reports_and_none_is_reported_apart() -> None:
    samples = [sample(0, {"kind": "bug_report", "root_cause": "api_misuse"}, {"root_cause": "api_misuse"}),
               sample(1, {"kind": "bug_report", "root_cause": "user_code_error"}, {"root_cause": "api_misuse"}),
               sample(2, {"kind": "feature_request", "root_cause": "none"}, {"root_cause": "none"}),
               sample(3, {"kind": "bug_report", "root_cause": "none"}, {"root_cause": "api_misuse"}),
               sample(4, {"kind": "usage_question", "root_cause": "api_misuse"}, {"root_cause": "api_misuse"})]
    scores = score_samples(samples, TAXONOMY, {}, seed=0, resamples=100)["root_cause"]
    assert scores["n"] == 2 and scores["accuracy"] == 0.5
    assert scores["skipped"] == {"none (reported apart)": 1, "not a bug report": 2}
    assert scores["none_apart"] == {"n": 2, "predicted_none": 1}


def test_transfer_scores_only_shared_labels_and_skips_an_axis_with_one_gold_class() -> None:
    samples = [sample(i, {"kind": "bug_report", "symptom": SYMPTOMS[i % 3]},
                      {"kind": "bug_report", "symptom": "out_of_memory"}) for i in range(9)]
    allowed = {"kind": {"bug_report", "usage_question"}, "symptom": {"out_of_memory", "hang_timeout"}}
    scores = score_samples(samples, TAXONOMY, {}, seed=0, resamples=100, allowed=allowed)
    assert scores["kind"]["n"] == 0 and "1 gold class" in str(scores["kind"]["not_scored"])
    assert scores["symptom"]["n"] == 6 and scores["symptom"]["skipped"] == {"label the case base never holds": 3}


def test_the_compare_command_pairs_one_predictor_across_two_stored_runs(tmp_path: Path) -> None:
    for name, every in (("better", 8), ("worse", 2)):
        (tmp_path / name).mkdir()
        results = {"evaluations": [{"predictors": {"linear-structured": {"samples": run(every)}}}]}
        (tmp_path / name / "results.json").write_text(json.dumps(results), encoding="utf-8")
    ran = CliRunner().invoke(app, ["compare", str(tmp_path / "better"), str(tmp_path / "worse"), "--source", "all"])
    assert ran.exit_code == 0, ran.output
    symptom = next(line for line in ran.output.splitlines() if line.startswith("| symptom |"))
    assert symptom.startswith("| symptom | 80 | +0.375 [+0.")  # 30 more right of 80, beyond noise
    assert "| kind | 0 | - | - |" in ran.output
    wrong = CliRunner().invoke(app, ["compare", str(tmp_path / "better"), str(tmp_path / "worse"),
                                     "--predictor", "knn"])
    assert wrong.exit_code == 1 and "predictor 'knn' is not in this run" in wrong.output


def test_compare_refuses_runs_of_other_records(tmp_path: Path) -> None:
    for name, samples in (("five", run(8)), ("four", run(8)[:-1])):
        (tmp_path / name).mkdir()
        results = {"evaluations": [{"predictors": {"linear-structured": {"samples": samples}}}]}
        (tmp_path / name / "results.json").write_text(json.dumps(results), encoding="utf-8")
    ran = CliRunner().invoke(app, ["compare", str(tmp_path / "five"), str(tmp_path / "four"), "--source", "all"])
    assert ran.exit_code == 1 and "did not predict the same records" in ran.output
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "results.json").write_text("{}", encoding="utf-8")
    empty = CliRunner().invoke(app, ["compare", str(tmp_path / "five"), str(tmp_path / "empty")])
    assert empty.exit_code == 1 and "no evaluations[0].predictors" in empty.output


def test_a_metric_undefined_in_some_repetitions_is_averaged_over_the_others() -> None:
    assert _mean_of_defined([0.5, float("nan"), 0.7]) == pytest.approx(0.6)
    assert _sd_of_defined([0.5, float("nan"), 0.7]) == pytest.approx(0.1414, abs=1e-4)
    assert np.isnan(_mean_of_defined([float("nan")] * 2)) and _sd_of_defined([float("nan"), 0.5]) == 0.0
