"""The thresholds chosen again inside the folds: each fold's threshold comes from the other folds' records only,
at the cost the fixed threshold implies, and a label withheld from a bare report stays withheld."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.knowledge.taxonomy import Taxonomy
from eval.cli import app
from eval.scoring import Sample
from eval.thresholds import select_axis, utility_threshold

RIGHT, WRONG = "hang_timeout", "api_exception"


def _sample(i: int, fold: int, confidence: float, right: bool, shown: bool = True) -> Sample:
    return {"id": f"acme/trainer#{i}", "fold": fold, "repeat": 0, "source": "ddl-dev.jsonl", "type": "issue",
            "gold": {"symptom": RIGHT},
            "predicted": {"symptom": {"label": (RIGHT if right else WRONG) if shown else None,
                                      "confidence": confidence,
                                      "top": [[RIGHT if right else WRONG, confidence], ["oom", 0.01]]}}}


def _samples() -> list[Sample]:
    # Fold 0: its low-confidence labels are right; folds 1 and 2: theirs are wrong. High-confidence ones are right.
    out, i = [], 0
    for fold, low_right in ((0, True), (1, False), (2, False)):
        for confidence, right in [(0.55, low_right)] * 4 + [(0.8, True)] * 2:
            out.append(_sample(i, fold, confidence, right))
            i += 1
    out.append(_sample(i, 0, 0.9, True, shown=False))  # a bare report: no label under any threshold
    return out


def test_the_threshold_with_the_best_utility_is_chosen_from_the_middle_of_a_tie() -> None:
    confidence = np.array([0.55] * 4 + [0.8] * 2)
    correct = np.array([False] * 4 + [True] * 2)
    assert utility_threshold(confidence, correct, cost=1.0) == 0.70  # 0.60 ... 0.80 tie
    assert utility_threshold(confidence, ~correct, cost=1.0) == 0.45  # the middle of the 0.30-0.55 tie
    assert utility_threshold(confidence, correct, cost=0.1) == 0.70  # cheap wrong labels still lose here


def test_each_fold_is_thresholded_by_the_other_folds_only(taxonomy: Taxonomy) -> None:
    selection = select_axis(_samples(), "symptom", taxonomy, fixed_threshold=0.5, report_source=None)
    # Fold 0 is judged by folds 1 and 2 (low confidence wrong): 0.70, though its own low labels are right.
    # Folds 1 and 2 are judged by fold 0 and one wrong fold: the low labels tie at zero utility.
    assert selection.chosen == [0.70, 0.55, 0.55]
    assert selection.cost == 1.0 and selection.records == 19
    assert selection.fixed.coverage == pytest.approx(18 / 19)  # the bare report is never shown
    assert selection.fixed.accuracy == pytest.approx(10 / 18)
    # Nested: fold 0 shows only its 0.8s; folds 1 and 2 show everything but the bare report.
    assert selection.nested.coverage == pytest.approx(14 / 19)
    assert selection.nested.accuracy == pytest.approx(6 / 14)
    assert selection.nested.utility == pytest.approx((6 - 8) / 19)


def test_the_command_reads_a_stored_run_and_names_what_is_missing(tmp_path: Path) -> None:
    import json

    results = {"config": {"settings": {"taxonomy": "ddl-v1", "thresholds": {
        "kind": 0.6, "stage": 0.6, "symptom": 0.5, "root_cause": 0.5, "fix_pattern": 0.5}}},
        "evaluations": [{"predictors": {"linear-structured": {"samples": _samples()}}}]}
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
    ran = CliRunner().invoke(app, ["thresholds", str(tmp_path), "--source", "all"])
    assert ran.exit_code == 0, ran.output
    assert "| kind | 0 | 0.60 (1.5) | - @ 0.00 (+0.000) | - @ 0.00 (+0.000) | - (no scored records) |" in ran.output
    assert "| symptom | 19 | 0.50 (1) | 0.556 @ 0.95 (+0.105) | 0.429 @ 0.74 (-0.105) | 0.55-0.70, 0.55 |" in ran.output
    missing = CliRunner().invoke(app, ["thresholds", str(tmp_path), "--predictor", "knn"])
    assert missing.exit_code == 1 and "predictor 'knn' is not in this run" in missing.output


def test_a_run_with_one_test_part_is_refused_with_the_reason(taxonomy: Taxonomy) -> None:
    one_part = [{**sample, "fold": 0} for sample in _samples()]
    with pytest.raises(ValueError, match="single test part"):
        select_axis(one_part, "symptom", taxonomy, fixed_threshold=0.5, report_source=None)


def test_a_bare_report_stays_unshown_under_a_lower_nested_threshold(taxonomy: Taxonomy) -> None:
    samples = [_sample(i, i % 3, 0.4, True) for i in range(12)]  # every label right at 0.4: 0.30-0.40 tie
    bare = _sample(99, 0, 0.45, True, shown=False)
    recorded = [*samples, {**bare, "needs_details": True}]
    selection = select_axis(recorded, "symptom", taxonomy, fixed_threshold=0.5, report_source=None)
    assert selection.chosen == [0.35, 0.35, 0.35]  # below 0.45: the bare report would be shown if not flagged
    assert selection.nested.coverage == pytest.approx(12 / 13)  # the bare report is never shown
    # An older run without the flag: another axis withheld a label it was sure of, so the report was bare.
    inferred = {**bare, "predicted": {**bare["predicted"],
                                      "kind": {"label": None, "confidence": 0.9, "top": [["bug_report", 0.9]]}}}
    older = select_axis([*samples, inferred], "symptom", taxonomy, fixed_threshold=0.5, report_source=None,
                        thresholds={"kind": 0.6, "symptom": 0.5})
    assert older.nested.coverage == pytest.approx(12 / 13)
    unflagged = select_axis([*samples, bare], "symptom", taxonomy, fixed_threshold=0.5, report_source=None,
                            thresholds={"kind": 0.6, "symptom": 0.5})
    assert unflagged.nested.coverage == 1.0  # below every threshold and not flagged: a plain low confidence
