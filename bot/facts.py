"""What a report still lacks: too little text to triage at all, or the facts its symptom needs (taxonomy data)."""

from __future__ import annotations

import re
from functools import cache

from bot.domain import EnvironmentFacts, Issue
from bot.normalise import NormalisedIssue
from bot.taxonomy import Fact, Taxonomy

MIN_WORDS = 12  # fewer words than this outside the title (after template boilerplate) cannot be triaged
MIN_CHARS = 300  # ... unless the body is longer than this anyway (code, a log)
MAX_ASKED = 4  # a checklist longer than this is not read
NON_BUG_KINDS = ("usage_question", "feature_request", "documentation")  # a short title can be enough for these
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*")


def needs_details(normalised: NormalisedIssue) -> bool:
    """An empty body, a bare title, or a template left unfilled: ask for the facts instead of guessing."""
    if normalised.signal or len(normalised.body) >= MIN_CHARS:  # an error line or a pasted log is something
        return False
    return len(_WORD.findall(normalised.body)) < MIN_WORDS


@cache
def _patterns(fact: Fact) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in fact.present)


def fact_present(fact: Fact, text: str, environment: EnvironmentFacts) -> bool:
    if any(getattr(environment, name, None) is not None for name in fact.environment):
        return True
    return any(p.search(text) for p in _patterns(fact))


def missing_facts(issue: Issue, environment: EnvironmentFacts, taxonomy: Taxonomy, kind: str | None,
                  symptom: str | None) -> list[str]:
    """Fact ids to ask for: the shown symptom's first, then what any bug report needs; only absent ones.

    Nothing is asked of a report that is not a bug (a question, a feature request) or whose kind is unsure.
    """
    if kind != "bug_report":
        return []
    wanted = list(taxonomy.value("symptom", symptom).ask_for) if symptom else []
    wanted += [f for f in taxonomy.ask_for_any_bug if f not in wanted]
    text = f"{issue.title}\n{issue.body}"
    return [f for f in wanted if not fact_present(taxonomy.fact(f), text, environment)][:MAX_ASKED]
