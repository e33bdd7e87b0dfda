"""The suggestion comment: one markdown body with a hidden marker, so a re-run edits it in place.

What earns a place in it (precision over coverage): only neighbours above the similarity floor, a
confidence that never reads 0% or 100%, a short "needs details" comment for an issue with too little text,
a checklist of only the facts the report lacks, and no root-cause / fix table for questions and requests
(NON_BUG_KINDS).
"""

from __future__ import annotations

import math
import re

from bot.domain import Neighbour, RelatedIssue, TriageResult
from bot.facts import NON_BUG_KINDS
from bot.settings import AXES
from bot.taxonomy import Taxonomy

MARKER_PREFIX = "<!-- ddl-triage v1"
MARKER_PATTERN = re.compile(r"<!-- ddl-triage v1\b[^>]*-->")
HEADING = "### ddl-triage suggestion"
AXIS_TITLES = {"kind": "Kind", "stage": "Stage", "symptom": "Symptom", "root_cause": "Likely root cause",
               "fix_pattern": "Likely fix pattern"}
NOT_SURE = "_not sure_"
CORRECTED = "set by a maintainer"
MAX_SIMILAR = 5
MAX_RELATED = 5
NEEDS_DETAILS = ("This issue does not have enough detail yet for a triage suggestion. To help the maintainers "
                 "reproduce it, please edit the issue and add:")
NEEDS_DETAILS_FACTS = ("traceback", "torch_version", "cuda_version", "framework_version", "launch_command")
ASK_MISSING = "**To help the maintainers, please add:**"
NO_NEIGHBOURS = "_No labelled case is close enough to this issue to show as evidence._"
FOOTER = ("<sub>Automated suggestion by ddl-triage from similar labelled issues; it may be wrong and changes "
          "nothing on this issue. Maintainers: correct it with a comment `/triage AXIS=VALUE` "
          "(for example `/triage symptom=hang_timeout`), or re-run it with `/triage`.</sub>")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~])")
_GITHUB_ID = re.compile(r"^([\w.-]+/[\w.-]+)#(\d+)$")


def escape_markdown(text: str, limit: int = 120) -> str:
    """Text from outside the bot, made inert: no markup, no HTML, no @-mentions, no autolinks, one line."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = text.replace("@", "@\u200b")  # a zero-width space after @ stops a mention
    return re.sub(r"(?i)(https?|www)(:|\.)", "\\1\u200b\\2", text)


def marker(result: TriageResult) -> str:
    return (f"{MARKER_PREFIX} taxonomy={result.taxonomy_version} model={result.model_id} "
            f"predictor={result.predictor} -->")


def has_marker(body: str | None) -> bool:
    return bool(body and MARKER_PATTERN.search(body))


def percent(confidence: float) -> str:
    """A calibrated confidence as shown: whole percent, never 0% or 100%."""
    return f"{min(99, max(1, math.floor(confidence * 100)))}%"


def axis_definition(taxonomy: Taxonomy, axis: str, label: str) -> str:
    plain = re.sub(r"\s*\([^)]*\)", "", taxonomy.value(axis, label).definition or "")
    definition = plain.split(" - ")[0].rstrip(".")
    if len(definition) <= 70:
        return definition
    return definition[:70].rsplit(" ", 1)[0].rstrip(",;") + "…"


def _label_text(taxonomy: Taxonomy, axis: str, label: str) -> str:
    return f"`{label}`" + (" (" + axis_definition(taxonomy, axis, label) + ")" if axis != "kind" else "")


def render_comment(result: TriageResult, taxonomy: Taxonomy, axes: tuple[str, ...] = AXES,
                   max_similar: int = MAX_SIMILAR, similarity_floor: float = 0.0) -> str:
    """The markdown body the bot posts (or the CLI prints) for one triage result."""
    lines = [marker(result), HEADING, ""]
    if result.needs_details:
        lines += [NEEDS_DETAILS, *[f"- [ ] {taxonomy.fact(f).ask}" for f in NEEDS_DETAILS_FACTS], "", FOOTER]
        return "\n".join(lines) + "\n"
    short = result.label("kind") in NON_BUG_KINDS
    shown = tuple(a for a in axes if a == "kind") if short else axes
    lines += ["| | suggestion | confidence |", "|---|---|---|"]
    for axis in shown:
        pred = result.predictions[axis]
        label = _label_text(taxonomy, axis, pred.label) if pred.label else NOT_SURE
        confidence = CORRECTED if pred.corrected else percent(pred.confidence)
        lines.append(f"| {AXIS_TITLES[axis]} | {label} | {confidence} |")
    fix = result.predictions["fix_pattern"].label if "fix_pattern" in shown else None
    if fix and (checklist := taxonomy.value("fix_pattern", fix).checklist):
        lines += ["", f"**What usually resolves `{fix}`:**", *[f"- [ ] {item}" for item in checklist]]
    if result.missing_facts and not short:
        lines += ["", ASK_MISSING, *[f"- [ ] {taxonomy.fact(f).ask}" for f in result.missing_facts]]
    lines += _related_section(result.related)
    if result.repo_labels:
        lines += ["", "**Labels this repository uses for issues like this:** " + ", ".join(
            f"`{escape_markdown(name, 40)}` ({percent(p)})" for name, p in result.repo_labels)]
    lines += _cases_section(result.neighbours, taxonomy, max_similar, similarity_floor)
    facts = result.environment.known()
    if facts and not short:
        lines += ["", "**Environment found in the issue:** " +
                  ", ".join(f"{k.replace('_', ' ')} {escape_markdown(v, 40)}" for k, v in facts.items())]
    if result.fallback:
        lines += ["", f"<sub>The LLM answer was not usable ({escape_markdown(result.fallback, 100)}); "
                      "this suggestion comes from the embedding classifier.</sub>"]
    lines += ["", FOOTER]
    return "\n".join(lines) + "\n"


def _related_section(related: list[RelatedIssue]) -> list[str]:
    """This repository's own issues first (from the repository memory; the service fills them in)."""
    if not related:
        return []
    lines = ["", "**Possibly related in this repository:**"]
    for r in related[:MAX_RELATED]:
        what = "pull request" if r.type == "pull_request" else "issue"
        title = f" {escape_markdown(r.title, 90)}" if r.title else ""
        labels = f"; labels {', '.join(f'`{escape_markdown(x, 40)}`' for x in r.labels[:4])}" if r.labels else ""
        dup = " **possible duplicate**" if r.possible_duplicate else ""
        lines.append(f"- {what} #{r.number}{title} ({_how_it_ended(r)}{labels}; similarity {r.score:.2f}){dup}")
    return lines


def _how_it_ended(r: RelatedIssue) -> str:
    if r.state == "open":
        return "open"
    if r.state == "merged":
        return "merged"
    if r.state_reason == "duplicate" or r.duplicate_of:
        return f"closed as duplicate of #{r.duplicate_of}" if r.duplicate_of else "closed as duplicate"
    if r.state_reason == "not_planned":
        return "closed as not planned"
    if r.closed_by:
        by = r.closed_by if r.closed_by.startswith("#") else f"commit {r.closed_by[:12]}"
        return f"fixed by {by}"
    return "closed"


def _cases_section(neighbours: list[Neighbour], taxonomy: Taxonomy, limit: int, floor: float) -> list[str]:
    """Labelled cases of the pack above the similarity floor; a pull request is never a "similar issue"."""
    close = [n for n in neighbours if n.url and n.url.startswith("https://") and n.score >= floor][:limit]
    if not close:
        return ["", NO_NEIGHBOURS] if neighbours else []
    lines = ["", "**Similar labelled cases:**"]
    for n in close:
        fix = n.labels.get("fix_pattern")
        established = taxonomy.is_established("fix_pattern", fix)
        symptom = n.labels.get("symptom")
        what = f"`{symptom}`" if symptom and symptom != "none" else "no failure"
        title = f" {escape_markdown(n.title, 90)}" if n.title else ""
        state = f", {escape_markdown(n.state, 20)}" if n.state else ""
        if n.is_pull_request:
            how = f"fixed by pull request with `{fix}`" if established else "fixed by this pull request"
            lines.append(f"- pull request [{_link_text(n.id)}]({n.url}){title} ({how} for {what}{state}; "
                         f"similarity {n.score:.2f})")
        else:
            how = f"fixed by `{fix}`" if established else "fix not established"
            lines.append(f"- issue [{_link_text(n.id)}]({n.url}){title} ({what}, {how}{state}; "
                         f"similarity {n.score:.2f})")
    return lines


def _link_text(case_id: str) -> str:
    """`owner/repo#N` as GitHub writes it; anything else escaped."""
    return case_id if _GITHUB_ID.match(case_id) else escape_markdown(case_id, 60)
