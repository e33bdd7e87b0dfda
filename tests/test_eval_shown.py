"""Scoring what the bot shows, on what it triages: root cause and fix pattern on issues only, the accuracy and
coverage of the labels above the thresholds, and the resolution-visible records apart."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bot.knowledge.taxonomy import Taxonomy
from eval.rescore import rescore
from eval.scoring import PULL_REQUEST, Answer, Sample, axis_view, score_samples
from eval.slices import slice_scores
from eval.tables import shown_table


def _sample(i: int, kind: str, gold_fix: str, said: str, confidence: float, *, shown: bool,
            visible: bool | None = None) -> Sample:
    answer = Answer(label=said if shown else None, confidence=confidence, top=[(said, confidence)])
    return Sample(id=f"acme/trainer#{i}", fold=0, repeat=0, source="ddl-dev.jsonl", type=kind, repo="acme/trainer",
                  input_sha256="h", gold={"kind": "bug_report", "fix_pattern": gold_fix},
                  predicted={"kind": Answer(label="bug_report", confidence=0.9, top=[("bug_report", 0.9)]),
                             "fix_pattern": answer},
                  fallback=None, resolution_visible=visible)


def _samples() -> list[Sample]:
    return [
        _sample(1, "issue", "framework_patch", "framework_patch", 0.9, shown=True, visible=True),
        _sample(2, "issue", "user_code_fix", "framework_patch", 0.8, shown=True, visible=False),
        _sample(3, "issue", "user_code_fix", "user_code_fix", 0.3, shown=False, visible=False),
        _sample(4, "issue", "framework_patch", "framework_patch", 0.2, shown=False, visible=True),
        _sample(5, "pull_request", "framework_patch", "framework_patch", 0.99, shown=True, visible=True),
    ]


def test_fix_pattern_is_scored_on_issues_only(taxonomy: Taxonomy) -> None:
    view = axis_view(_samples(), "fix_pattern", taxonomy)
    assert len(view.gold) == 4 and view.skipped == {PULL_REQUEST: 1}
    assert axis_view(_samples(), "kind", taxonomy).skipped == {}  # kind still scores every record


def test_shown_label_accuracy_and_coverage_sit_beside_top1(taxonomy: Taxonomy) -> None:
    scores = score_samples(_samples(), taxonomy, {}, seed=0, resamples=100)
    mean: Any = scores["fix_pattern"]["mean"]
    assert mean["accuracy"] == 0.75  # 3 of the 4 issues have the right first label
    assert mean["coverage"] == 0.5 and mean["shown_accuracy"] == 0.5  # 2 shown, 1 of them right
    evaluation = {"predictors": {"p": {"axes": scores}}}
    table = shown_table(evaluation)
    row = table.rows[0]
    column = table.header.index("fix_pattern shown accuracy")
    assert row[column - 1:column + 2] == ["0.750", "0.500", "0.500"]


def test_the_resolution_visible_records_are_reported_apart(taxonomy: Taxonomy) -> None:
    slices: dict[str, Any] = slice_scores({"p": _samples()}, taxonomy)["resolution"]
    visible = slices["resolution visible"]["p"]["fix_pattern"]
    hidden = slices["resolution not visible"]["p"]["fix_pattern"]
    assert (visible["n"], visible["accuracy"]) == (2, 1.0)
    assert (hidden["n"], hidden["accuracy"]) == (2, 0.5)


def test_a_stored_run_is_rescored_under_todays_rules(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(json.dumps({"id": s["id"], "annotation": {"resolution_visible": s["resolution_visible"]}})
                              for s in _samples()) + "\n")
    stored = []
    for sample in _samples():
        old = dict(sample)
        del old["resolution_visible"]  # a run stored before the field existed
        stored.append(old)
    results: dict[str, Any] = {
        "config": {"settings": {"taxonomy": "ddl-v1", "thresholds": {}}, "seed": 0, "bootstrap_resamples": 100},
        "provenance": {"data_files": {str(gold): {}}},
        "evaluations": [{"mode": "cv", "paired": {"reference": "p"},
                         "predictors": {"p": {"samples": stored}, "q": {"samples": copy.deepcopy(stored)}}}]}
    evaluation = rescore(results)["evaluations"][0]
    assert evaluation["predictors"]["p"]["axes"]["fix_pattern"]["skipped"] == {PULL_REQUEST: 1}
    assert evaluation["slices"]["resolution"]["resolution visible"]["p"]["fix_pattern"]["n"] == 2
    assert evaluation["paired"]["comparisons"]["q"]["fix_pattern"]["accuracy_diff"] == 0.0
