"""`describe` reproduces the TOSEM'23 study's totals from the gold file read in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.errors import DataError
from eval.describe import describe_file, read_labelled

STUDY_STAGE_TOTALS = {"package build & import": 82, "communication setup": 133, "data and model preparation": 57,
                      "training & evaluation": 365}


def test_native_taxonomy_reproduces_the_study_totals(gold_dir: Path) -> None:
    used, rows, problems = read_labelled(gold_dir / "liu23-labels.jsonl", "auto")
    assert used == "liu23" and not problems and len(rows) == 637
    for stage, total in STUDY_STAGE_TOTALS.items():
        assert sum(r.stage == stage for r in rows) == total
    training = [r for r in rows if r.stage == "training & evaluation"]
    assert sum(r.inner == "program failure" for r in training) + sum(
        r.inner == "unexpected performance" for r in training) == 365


def test_describe_prints_the_totals_and_writes_a_heatmap(gold_dir: Path, tmp_path: Path) -> None:
    text = describe_file(gold_dir / "liu23-labels.jsonl", "liu23", tmp_path)
    assert "| **total** | **637** | 100% |" in text
    for stage, total in STUDY_STAGE_TOTALS.items():
        assert f"| {stage} | {total} |" in text
    assert "## Symptoms within stage (leaf counts)" in text and "## Distributed-specific faults" in text
    assert (tmp_path / "describe-liu23-labels-liu23-symptom-fix.png").stat().st_size > 10_000


def test_the_mapped_ddl_v1_stages_keep_the_same_totals(gold_dir: Path) -> None:
    _, rows, _ = read_labelled(gold_dir / "liu23-labels.jsonl", "ddl-v1")
    assert sum(r.stage == "communication_setup" for r in rows) == 133
    assert sum(r.stage == "environment_setup" for r in rows) == 82


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _record(i: int, **native: object) -> dict[str, object]:
    labels = {"kind": "bug_report", "stage": "training", "symptom": "hang_timeout", "root_cause": None,
              "fix_pattern": "communication_tuning"}
    base = {"stage": "training & evaluation", "inner_category": "unexpected performance", "symptom": "hang",
            "fix_pattern": "fix network setting & fix dependency version", "distributed_specific": True}
    return {"id": f"made#{i}", "title": "made up", "body": "made up", "labels": labels, "native": {**base, **native}}


def test_compound_fix_patterns_count_under_their_first_part(tmp_path: Path) -> None:
    path = _write(tmp_path / "made.jsonl", [_record(1), _record(2, fix_pattern="fix framework verion")])
    _, rows, problems = read_labelled(path, "liu23")
    assert not problems
    assert [r.fix for r in rows] == ["fix network setting", "fix framework version"]  # an alias is canonicalised


def test_a_label_outside_the_native_taxonomy_names_file_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "made.jsonl", [_record(1), _record(2, symptom="spontaneous combustion")])
    _, rows, problems = read_labelled(path, "liu23")
    assert len(rows) == 1
    assert str(problems[0]).startswith(f"{path}:2: 'spontaneous combustion' is not a symptom")
    assert "(field 'native.symptom')" in str(problems[0])


def test_a_file_with_nothing_usable_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("{broken\n")
    with pytest.raises(DataError, match="no usable labelled records"):
        describe_file(path, "auto", None)
