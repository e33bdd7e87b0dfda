from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.errors import DataError
from bot.knowledge.dataset import GOLD_FILES, LoadReport, load_gold, read_issues
from bot.knowledge.taxonomy import Taxonomy

GOOD = {"id": "x/y#1", "title": "t", "body": "b", "labels": {"kind": "bug_report", "stage": "training",
        "symptom": "hang_timeout", "root_cause": "unknown", "fix_pattern": "unresolved"}}


@pytest.mark.parametrize("name", GOLD_FILES)
def test_every_gold_file_loads_without_errors(gold_dir: Path, taxonomy: Taxonomy, name: str) -> None:
    report = LoadReport()
    cases = load_gold(gold_dir / name, taxonomy, report)
    assert cases and report.errors == []


def _jsonl(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "gold.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_bad_lines_are_reported_with_file_line_and_field_and_the_rest_is_kept(
        tmp_path: Path, taxonomy: Taxonomy) -> None:
    bad_label = {**GOOD, "id": "x/y#3", "labels": {**GOOD["labels"], "symptom": "sad_gpu"}}  # type: ignore[dict-item]
    missing = {k: v for k, v in GOOD.items() if k != "title"}
    path = _jsonl(tmp_path, [json.dumps(GOOD).encode(), b"{not json", json.dumps(bad_label).encode(),
                             json.dumps(missing).encode()])
    report = LoadReport()
    cases = load_gold(path, taxonomy, report)
    assert [c.id for c in cases] == ["x/y#1"]
    messages = [str(e) for e in report.errors]
    assert messages[0].startswith(f"{path}:2: not JSON")
    assert f"{path}:3: 'sad_gpu' is not a symptom" in messages[1] and "(field 'labels.symptom')" in messages[1]
    assert messages[2] == f"{path}:4: missing (field 'title')"


def test_without_a_report_the_first_bad_line_raises(tmp_path: Path, taxonomy: Taxonomy) -> None:
    path = _jsonl(tmp_path, [json.dumps(GOOD).encode(), b"[1, 2]"])
    with pytest.raises(DataError, match=r":2: not a JSON object"):
        load_gold(path, taxonomy)


def test_batch_input_keeps_non_utf8_lines_and_skips_unreadable_ones(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [b'{"id": "a", "title": "caf\xe9", "body": ""}', b"nope", b'{"id": "c", "title": "t"}',
                             b'{"id": "d", "title": "t", "body": "b"}'])
    errors: list[DataError] = []
    issues = list(read_issues(path, errors.append))
    assert [i.id for i in issues] == ["a", "d"]
    assert issues[0].title == "caf\ufffd"
    assert [e.line for e in errors] == [1, 2, 3]
    assert errors[2].field == "body"
