"""The evidence floor's measurement reads each gold record as the App sees it: the opening post, dated, paired
only with cases opened before it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

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


def test_the_rule_takes_the_lowest_bin_from_which_on_most_neighbours_share_the_symptom() -> None:
    from eval.neighbour_floor import bin_pairs, chosen_floor

    # A lucky low bin (0.30: one pair, a hit) under a bin where most miss (0.60) does not count.
    sims = np.array([0.31, 0.61, 0.62, 0.63, 0.71, 0.72, 0.81])
    same = np.array([True, False, False, True, True, True, True])
    assert chosen_floor(bin_pairs(sims, same)) == 0.70
    assert chosen_floor(bin_pairs(np.array([0.9]), np.array([False]))) is None
    # A copy's cosine can round above 1.0: the top bin holds it.
    assert [(row.low, row.pairs) for row in bin_pairs(np.array([1.0000001]), np.array([True]))][-1] == (0.95, 1)


def test_the_nested_floor_of_a_part_is_chosen_on_the_other_parts_only() -> None:
    from eval.neighbour_floor import PARTS, Pairs, bin_pairs, chosen_floor, nested_floor, part_of

    ids = [f"acme/trainer#{n}" for n in range(200)]
    first = [i for i in ids if part_of(i) == 0][:3]
    others = [i for i in ids if part_of(i) != 0][:3]
    # Part 0's own pairs (all hits, down to 0.50) would pull a floor chosen with them down to 0.50: with them the
    # [0.65, 0.70) bin is 4 hits of 7. The other parts' pairs alone (3 misses there) say 0.80.
    query = [*first, first[0], *first, *others, *others]
    sims = [0.52, 0.53, 0.54, 0.65, 0.66, 0.67, 0.68, 0.66, 0.67, 0.68, 0.82, 0.83, 0.84]
    same = [True] * 7 + [False] * 3 + [True] * 3
    pairs = Pairs(np.array(query, dtype=object), np.array(sims), np.array(same))
    rows = nested_floor(pairs, fixed=0.75)
    assert len(rows) == PARTS
    assert rows[0].floor == 0.80  # not 0.50: its own pairs took no part in the choice
    assert (rows[0].pairs, rows[0].pairs_fixed) == (0, 0)  # none of its pairs reaches 0.80 or 0.75
    assert chosen_floor(bin_pairs(pairs.sims, pairs.same)) == 0.50  # what choosing on every pair would give


def test_the_memory_pairs_each_record_with_earlier_records_of_its_own_repository_only(settings: Settings,
                                                                                    tmp_path: Path) -> None:
    from eval.neighbour_floor import memory_pairs

    def record(repo: str, number: int, kind: str, day: str | None, stage: str = "training",
               symptom: str = "hang_timeout", text: str = HANG) -> dict[str, object]:
        made = _record(number, symptom, day, text.format(n=number))
        labels = {**made["labels"], "kind": kind, "stage": stage}  # type: ignore[dict-item]
        return {**made, "id": f"{repo}#{number}", "repo": repo, "labels": labels}

    records = [record("acme/trainer", 1, "bug_report", "2021-06-01"),
               record("acme/trainer", 2, "bug_report", "2022-06-01"),
               record("acme/trainer", 3, "bug_report", None),  # mid-thread: no opening post, the memory never has it
               record("acme/server", 4, "bug_report", "2020-01-01"),  # another repository, opened first
               # A request: no failure and no stage to share, so never asked and never scored as a neighbour.
               record("acme/trainer", 8, "feature_request", "2022-12-01", stage="none", symptom="none",
                      text="Please export the training curves {n} to TensorBoard by default"),
               record("acme/trainer", 5, "usage_question", "2023-06-01", stage="inference"),
               record("acme/trainer", 6, "usage_question", "2024-06-01", stage="inference"),
               record("acme/trainer", 7, "usage_question", "2025-06-01")]
    data = tmp_path / "made-up.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    failures = memory_pairs(settings, [data])
    # #1 and #4 have nothing earlier in their own repository; #2 pairs with #1; #5's three earlier records are #1,
    # #2 and the request #8, which is not scored; #6 and #7 pair with their 3 nearest earlier trainer reports.
    # #3 takes no part, #4 is never a neighbour of a trainer record, #8 is never asked.
    assert sorted(failures.query) == ["acme/trainer#2", *["acme/trainer#5"] * 2, *["acme/trainer#6"] * 3,
                                      *["acme/trainer#7"] * 3]
    questions = memory_pairs(settings, [data], axis="stage", kind="usage_question")
    # Questions are asked; their neighbours are any earlier record, as "Asked before" recalls any answered issue:
    # #5 with #1 and #2 (training: misses), #6 with #5 (a hit), #1 and #2, #7 with three of #1, #2, #5 and #6.
    assert sorted(questions.query) == [*["acme/trainer#5"] * 2, *["acme/trainer#6"] * 3, *["acme/trainer#7"] * 3]
    assert [same for query, same in zip(questions.query, questions.same, strict=True)
            if query != "acme/trainer#7"].count(True) == 1


def test_the_memory_rule_takes_the_lowest_bin_from_which_on_the_share_above_reaches_the_target() -> None:
    from eval.neighbour_floor import PRECEDENT_TARGET, Pairs, bin_pairs, chosen_floor, nested_floor, part_of

    # Share at or above each bin: 0.85 -> 3/3, 0.80 -> 4/5 (0.80), 0.75 -> 5/7 (0.71), 0.70 -> 7/9 (0.78).
    # The majority rule would go down to 0.70 (every bin from there has more hits than misses, but 0.80's bin
    # is 1 of 2); the memory's target stops where the share above first falls short: at 0.75, so 0.80.
    sims = np.array([0.71, 0.72, 0.76, 0.77, 0.81, 0.82, 0.86, 0.87, 0.88])
    same = np.array([True, True, True, False, True, False, True, True, True])
    table = bin_pairs(sims, same)
    assert chosen_floor(table, PRECEDENT_TARGET) == 0.80
    # Nested, the other parts' pairs are chosen on by the same rule.
    others = [i for i in (f"acme/trainer#{n}" for n in range(100)) if part_of(i) != 0][: len(sims)]
    pairs = Pairs(np.array(others, dtype=object), sims, same)
    assert nested_floor(pairs, 0.80, PRECEDENT_TARGET)[0].floor == 0.80
    assert nested_floor(pairs, 0.80)[0].floor == 0.85
    assert chosen_floor(table) == 0.85  # the evidence rule stops at 0.80's bin (1 of 2 is not most)
