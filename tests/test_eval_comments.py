"""`python -m eval comments` end to end on made-up issues, and the figures it is made of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.comment_scoring import pinging_links, text_shows, wilson
from tests.test_eval_cli import made_up_records, run_eval

TASK = """name: tiny-comments
version: 1
datasets: [made-up.jsonl]
extra_cases: []
folds: 2
seed: 0
predictors: [default]
"""


def _threads(tmp_path: Path) -> tuple[Path, list[dict[str, object]]]:
    """Made-up threads of one repository (earlier ones are its own precedents), each window an opening post under
    its `description` header and a maintainer's later comment, except two windows that start mid-thread."""
    data = tmp_path / "data"
    data.mkdir()
    records = made_up_records()
    for i, record in enumerate(records):
        opened = f"2024-{1 + i // 28:02d}-{1 + i % 28:02d}"
        record.update(repo="made/up", url=f"https://github.com/made/up/issues/{i + 1}", type="issue", number=i + 1,
                      id=f"made/up#{i + 1}", state="closed",
                      body=f"reporter · description · {opened}\n{record['body']}\n\nmaintainer · comment · 2025-01-01\n"
                           "Fixed on main by a later change, thanks.")
    records[0]["type"] = "pull_request"  # never commented on
    for record in records[1:3]:  # windows without an opening post: not scored
        record["body"] = "maintainer · comment · 2025-01-01\nThe same as the other one, closing."
    (data / "made-up.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (data / "tiny-comments.yaml").write_text(TASK)
    return data, records


@pytest.mark.parametrize("memory", [False, True])
def test_eval_comments_comments_each_fold_as_opened_and_writes_the_table_and_the_comments(
        tmp_path: Path, memory: bool) -> None:
    data, records = _threads(tmp_path)
    out = tmp_path / "out"
    proc = run_eval("comments", "--task", str(data / "tiny-comments.yaml"), "--out", str(out), "--quiet",
                    *(["--memory"] if memory else []), state=tmp_path / "state",
                    extra_env={"DDL_TRIAGE_DATA_DIR": str(data)})
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    summary = results["summary"]
    assert summary["issues"] == len(records) - 3 and results["not_opened"] == 2 and results["memory"] is memory
    assert summary["not_sure_rows"] == 0 and summary["pinging_links"] == 0 and summary["asks_max"] <= 2
    assert summary["labels_and_asks_only"] == 0 and summary["links_after"] == 0
    assert summary["rows_max"] == 0  # the labels stay out of the text by default (`comment_labels: false`)
    assert summary["links_other_repo_unshared"] == 0 and summary["links_in_post"] == 0
    assert summary["evidence"]["issues"] == 0  # one repository only
    assert results["provenance"]["git"]
    samples = results["samples"]
    assert all("Fixed on main" not in (s["comment"] or "") for s in samples)  # the later comment is never read
    if memory:  # the memory recalls the repository's earlier threads: "Seen before" as the App shows it
        assert summary["reasons"]["precedent"]["issues"] > 0
        assert all(p["own"] for s in samples for p in s["precedents"])
    lines = [json.loads(line) for line in (out / "comments.jsonl").read_text().splitlines()]
    assert len(lines) == summary["issues"] and {"made/up#1", "made/up#2"} & {line["id"] for line in lines} == set()
    posted = [line["comment"] for line in lines if line["comment"]]
    assert posted and all(c.startswith("<!-- ddl-triage v1") and "](https://github.com/" not in c for c in posted)
    # The share posted is the comments written out over the issues commented on, and the table shows it.
    share = round(len(posted) / len(lines), 3)
    assert (summary["posted"], summary["posted_share"]) == (len(posted), share)
    table = (out / "comments.md").read_text()
    assert f"| share posted | {len(posted)} ({100 * share:.0f}%) |" in table
    assert "Regenerate: `python -m eval comments --task" in table
    assert "2 windows without an opening post not scored" in table
    assert table.strip() in proc.stdout


def test_asks_are_checked_against_literal_evidence_apart_from_the_patterns_that_decide_them() -> None:
    assert text_shows("framework_version", "pip list says deepspeed==0.15.1")
    assert text_shows("launch_command", "GPUS_PER_NODE=8 in my script")
    assert text_shows("versions", "torch 2.3.1, CUDA 12.1, deepspeed 0.14.2")
    assert not text_shows("versions", "torch 2.3.1, CUDA 12.1, deepspeed 0.14.2", "NVIDIA/Megatron-LM")
    assert text_shows("versions", "megatron-core 0.9.0 and transformer-engine==1.12", "NVIDIA/Megatron-LM")
    assert not text_shows("nccl_debug", "the job hangs forever")


def test_a_cross_reference_is_a_plain_url_or_owner_repo_number_outside_code_and_link_text() -> None:
    assert pinging_links("see https://github.com/a/b/issues/1 and a/b#2") == 2
    assert pinging_links("[a/b#3](https://redirect.github.com/a/b/issues/3) `a/b#4` #5 <!-- c/d#6 -->") == 0
    assert wilson(8, 10) == [0.49, 0.943] and wilson(0, 0) is None
