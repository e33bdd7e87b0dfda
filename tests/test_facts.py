"""Missing facts and too-little-text, tested on the real gold texts (read in place, never copied)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.domain import Issue
from bot.facts import fact_present, missing_facts, needs_details
from bot.normalise import normalise
from bot.taxonomy import Taxonomy

# Unmistakable evidence of a fact in a text, independent of the taxonomy's own (broader) patterns.
EVIDENCE = {
    "nccl_debug": r"NCCL INFO",
    "traceback": r"Traceback \(most recent call last\)",
    "torch_version": r"torch version\s*[.:]*\s*\d",
    "cuda_version": r"cuda version\s*[.:]*\s*\d",
    "launch_command": r"\b(torchrun|deepspeed --|mpirun)\b",
    "memory_setup": r"micro_batch_size|zero_optimization",
    "precision_setup": r"\bbf16\b|\bfp16\b",
}


@pytest.fixture(scope="module")
def gold_issues(gold_dir: Path) -> list[Issue]:
    issues = []
    for name in ("ddl-dev.jsonl", "ddl-dev-r3.jsonl"):
        for line in (gold_dir / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            issues.append(Issue(id=record["id"], title=record["title"] or "", body=record["body"] or ""))
    return issues


@pytest.mark.parametrize("fact", sorted(EVIDENCE))
def test_a_fact_the_gold_text_shows_is_never_asked_for(fact: str, gold_issues: list[Issue],
                                                       taxonomy: Taxonomy) -> None:
    showing = [i for i in gold_issues if re.search(EVIDENCE[fact], f"{i.title}\n{i.body}", re.IGNORECASE)]
    assert len(showing) >= 3, f"too few gold texts show {fact} to test it"
    symptoms = [v.id for v in taxonomy.axis("symptom").values if fact in v.ask_for] or [None]
    for issue in showing:
        environment = normalise(issue).environment
        assert fact_present(taxonomy.fact(fact), f"{issue.title}\n{issue.body}", environment), issue.id
        for symptom in symptoms:
            assert fact not in missing_facts(issue, environment, taxonomy, "bug_report", symptom), issue.id


def test_absent_facts_are_asked_for_the_symptom_first_and_only_for_bug_reports(taxonomy: Taxonomy) -> None:
    issue = Issue(title="Training hangs", body="After a few hundred steps every rank stops making progress and "
                                               "nothing is printed any more, GPU utilisation drops to zero.")
    environment = normalise(issue).environment
    asked = missing_facts(issue, environment, taxonomy, "bug_report", "hang_timeout")
    assert asked[0] == "nccl_debug" and "torch_version" in asked and len(asked) <= 4
    assert missing_facts(issue, environment, taxonomy, "usage_question", "hang_timeout") == []
    assert missing_facts(issue, environment, taxonomy, None, "hang_timeout") == []


def test_an_empty_or_bare_title_issue_needs_details_and_a_real_report_does_not(gold_issues: list[Issue]) -> None:
    assert needs_details(normalise(Issue(title="", body="")))
    assert needs_details(normalise(Issue(title="DeepSpeed ZeRO-3 does not work", body="")))
    assert needs_details(normalise(Issue(title="bug", body="### Describe the bug\n\n### To Reproduce\n\n")))
    detailed = [i for i in gold_issues if len(i.body) > 1000]
    assert detailed and not any(needs_details(normalise(i)) for i in detailed)


def test_every_fact_pattern_of_the_shipped_taxonomy_compiles_and_is_referenced(taxonomy: Taxonomy) -> None:
    referenced = set(taxonomy.ask_for_any_bug) | {f for v in taxonomy.axis("symptom").values for f in v.ask_for}
    assert referenced <= {f.id for f in taxonomy.facts}
    assert {"traceback", "torch_version", "launch_command"} <= referenced
