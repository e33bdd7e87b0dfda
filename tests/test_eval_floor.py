"""The evidence floor's measurement reads each gold record as the App sees it: the opening post, dated, paired
only with cases opened before it."""

from __future__ import annotations

import json
from pathlib import Path

from bot.core.settings import Settings
from eval.neighbour_floor import measure_floor

# Text written for this test.
HANG = "All ranks block in the gradient all-reduce after step {n}; py-spy shows every worker waiting on the barrier"


def _record(number: int, symptom: str, day: str | None, text: str) -> dict[str, object]:
    body = (f"reporter · description · {day}\n{text}\n\nmaintainer · comment · {day}\nA driver upgrade fixed it."
            if day else f"maintainer · comment · 2022-01-01\n{text}")
    return {"id": f"acme/trainer#{number}", "repo": "acme/trainer", "number": number, "type": "issue",
            "title": f"report {number}", "body": body,
            "labels": {"kind": "bug_report", "stage": "training", "symptom": symptom}}


def test_each_record_is_paired_only_with_cases_opened_before_its_opening_post(settings: Settings,
                                                                              tmp_path: Path) -> None:
    records = [_record(1, "hang_timeout", "2021-06-01", HANG.format(n=41)),
               _record(3, "hang_timeout", "2022-06-01", HANG.format(n=42)),
               _record(2, "communication_error", "2023-06-01", HANG.format(n=43)),
               _record(4, "hang_timeout", None, HANG.format(n=44))]  # mid-thread: a case, never a query
    data = tmp_path / "made-up.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    table = measure_floor(settings, [data], [data])
    # #1 has nothing before it. #4 starts mid-thread: never asked (no opening post), and as a case it was opened
    # no later than its first comment (2022-01-01). So #3 pairs with #1 and #4 (two hits) and #2 with #1, #3
    # and #4 (three misses); nothing is paired with a case opened after it.
    assert sum(row.pairs for row in table) == 5
    assert sum(row.hits for row in table) == 2
