"""What a report still lacks: too little text to triage at all, or the facts its likely failure needs (taxonomy data).

Maintainers judged generic asks noise (the same torch / CUDA / framework versions on every issue, a launch
command for a pip build failure, DeepSpeed's `ds_report` on a Colossal-AI issue, a version the text already
gave in prose). So an ask is made only for a fact that the recognised failure needs (a diagnosis's `ask`, the
symptom's `ask_for`), that the text does not show, in the project's own words, and never more than two.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from bot.domain import Diagnosis, EnvironmentFacts, Issue
from bot.normalise import MAX_INPUT_CHARS, REPO_FRAMEWORKS, NormalisedIssue, normalise
from bot.taxonomy import Fact, Taxonomy

MIN_WORDS = 12  # fewer words than this outside the title (after template boilerplate) cannot be triaged
MIN_CHARS = 300  # ... unless the body is longer than this anyway (code, a log)
MAX_ASKED = 2  # maintainers asked for at most two asks, the ones that decide the next step
NON_BUG_KINDS = ("usage_question", "feature_request", "documentation")  # a short title can be enough for these
NEEDS_DETAILS_FACTS = ("traceback", "versions")  # what a bare bug report needs first
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*")


def needs_details(normalised: NormalisedIssue) -> bool:
    """An empty body, a bare title, or a template left unfilled: ask for the facts instead of guessing."""
    if normalised.signal or len(normalised.body) >= MIN_CHARS:  # an error line or a pasted log is something
        return False
    return len(_WORD.findall(normalised.body)) < MIN_WORDS


@cache
def _patterns(present: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in present)


def fact_present(fact: Fact, text: str, environment: EnvironmentFacts) -> bool:
    """The fact's own evidence: an extracted environment field, or one of its patterns in the text."""
    if any(getattr(environment, name, None) is not None for name in fact.environment):
        return True
    return any(p.search(text) for p in _patterns(fact.present))


def fact_shown(taxonomy: Taxonomy, fact: Fact, text: str, environment: EnvironmentFacts,
               framework: str | None) -> bool:
    """The fact is there: its own evidence, or (a composite such as `versions`) every one of its parts."""
    if fact_present(fact, text, environment):
        return True
    parts = fact.parts(framework)
    return bool(parts) and all(fact_shown(taxonomy, taxonomy.fact(p), text, environment, framework) for p in parts)


def report_text(issue: Issue) -> str:
    """What the reporter wrote: title and body without template boilerplate or unfilled sections (a template's
    "**ds_report output** Please run `ds_report`" left as it was is not a `ds_report`)."""
    normalised = normalise(issue, max_chars=MAX_INPUT_CHARS)
    return f"{normalised.title}\n{normalised.body}"


def framework_of(issue: Issue, environment: EnvironmentFacts) -> str | None:
    """The project the issue was filed on (its repository first: a Colossal-AI issue that mentions DeepSpeed
    is still asked in Colossal-AI's words), else the one its text names."""
    repo = (issue.repo or "").lower()
    by_repo = next((name for key, name in REPO_FRAMEWORKS.items() if key in repo), None)
    return by_repo or environment.framework


def missing_facts(issue: Issue, environment: EnvironmentFacts, taxonomy: Taxonomy, kind: str | None,
                  symptom: str | None, *, diagnoses: Sequence[Diagnosis] = (), needs_details: bool = False
                  ) -> list[str]:
    """Fact ids to ask for, at most two: what the likely failure needs (each diagnosis's `ask`, then the
    symptom's `ask_for`) and the text does not show.

    Nothing is asked of a question, a feature request or a documentation report, nor of a report whose kind
    is unsure unless a failure was recognised. A report with too little text is asked for the error and the
    versions; when `symptom` (there: what its title clearly reads as) is a failure without an error - low
    throughput, a loss that differs, a hang - it is asked for what that failure needs instead of a traceback
    it will never have.
    """
    if needs_details:
        own = list(taxonomy.value("symptom", symptom).ask_for) if symptom and symptom != "none" else []
        wanted: list[str] = [*own, "versions"] if own and "traceback" not in own else list(NEEDS_DETAILS_FACTS)
    elif kind in NON_BUG_KINDS or not (kind == "bug_report" or diagnoses or (symptom and symptom != "none")):
        return []
    else:
        wanted = [d.ask for d in diagnoses if d.ask]
        wanted += list(taxonomy.value("symptom", symptom).ask_for) if symptom else []
        wanted = wanted or list(taxonomy.ask_for_any_bug)
    known = {f.id for f in taxonomy.facts}
    symptoms = {symptom, *(s for d in diagnoses for s in d.symptoms)} - {None}
    framework = framework_of(issue, environment)
    text = report_text(issue)
    chosen: list[str] = []
    for fact_id in dict.fromkeys(wanted):
        if fact_id not in known:
            continue  # a diagnosis naming a fact this taxonomy lacks asks nothing
        fact_id = _narrowed(taxonomy, taxonomy.fact(fact_id), text, environment, framework)
        fact = taxonomy.fact(fact_id)
        if any(fact_id in taxonomy.fact(c).parts(framework) for c in chosen):
            continue  # `ds_report` already gives the DeepSpeed version
        if symptoms & set(fact.not_for) or not (needs_details or _wanted_here(fact, text)):
            continue
        if fact_shown(taxonomy, fact, text, environment, framework):
            continue
        parts = [c for c in chosen if c in fact.parts(framework)]
        if parts:  # the project's own report replaces the one version asked for
            chosen[chosen.index(parts[0])] = fact_id
            chosen = list(dict.fromkeys(chosen))
        elif len(chosen) < MAX_ASKED:
            chosen.append(fact_id)
    return chosen


def _narrowed(taxonomy: Taxonomy, fact: Fact, text: str, environment: EnvironmentFacts, framework: str | None
              ) -> str:
    """A composite fact the text shows all but one part of: that one part ("the Transformer Engine version",
    not the commit the reporter already gave)."""
    parts = fact.parts(framework)
    missing = [p for p in parts if not fact_shown(taxonomy, taxonomy.fact(p), text, environment, framework)]
    return missing[0] if parts and len(missing) == 1 and not fact_present(fact, text, environment) else fact.id


def _wanted_here(fact: Fact, text: str) -> bool:
    return not fact.asked_when or any(p.search(text) for p in _patterns(fact.asked_when))
