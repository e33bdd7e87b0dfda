"""The suggestion comment: one markdown body with a hidden marker, so a re-run edits it in place."""

from __future__ import annotations

import re

from bot.domain import TriageResult
from bot.settings import AXES
from bot.taxonomy import Taxonomy

MARKER_PREFIX = "<!-- ddl-triage v1"
MARKER_PATTERN = re.compile(r"<!-- ddl-triage v1\b[^>]*-->")
AXIS_TITLES = {"kind": "Kind", "stage": "Stage", "symptom": "Symptom", "root_cause": "Likely root cause",
               "fix_pattern": "Likely fix pattern"}
NOT_SURE = "_not sure_"
MAX_SIMILAR = 5
FOOTER = ("<sub>Automated suggestion by ddl-triage from similar labelled issues; it may be wrong and changes "
          "nothing on this issue. Maintainers: correct it with a comment `/triage AXIS=VALUE` "
          "(for example `/triage symptom=hang_timeout`), or re-run it with `/triage`.</sub>")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~])")


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


def _label_text(taxonomy: Taxonomy, axis: str, label: str) -> str:
    return f"`{label}`" + (" (" + axis_definition(taxonomy, axis, label) + ")" if axis != "kind" else "")


def axis_definition(taxonomy: Taxonomy, axis: str, label: str) -> str:
    plain = re.sub(r"\s*\([^)]*\)", "", taxonomy.value(axis, label).definition or "")
    definition = plain.split(" - ")[0].rstrip(".")
    if len(definition) <= 70:
        return definition
    return definition[:70].rsplit(" ", 1)[0].rstrip(",;") + "…"


def render_comment(result: TriageResult, taxonomy: Taxonomy, axes: tuple[str, ...] = AXES,
                   max_similar: int = MAX_SIMILAR) -> str:
    """The markdown body the bot posts (or the CLI prints) for one triage result."""
    lines = [marker(result), "### ddl-triage suggestion", "", "| | suggestion | confidence |", "|---|---|---|"]
    for axis in axes:
        pred = result.predictions[axis]
        shown = _label_text(taxonomy, axis, pred.label) if pred.label else NOT_SURE
        lines.append(f"| {AXIS_TITLES[axis]} | {shown} | {pred.confidence:.0%} |")
    fix = result.predictions["fix_pattern"].label if "fix_pattern" in axes else None
    if fix:
        checklist = taxonomy.value("fix_pattern", fix).checklist
        if checklist:
            lines += ["", f"**What usually resolves `{fix}`:**", *[f"- [ ] {item}" for item in checklist]]
    similar = [n for n in result.neighbours if n.url and n.url.startswith("https://")][:max_similar]
    if similar:
        lines += ["", "**Similar labelled issues:**"]
        for n in similar:
            fixed = n.labels.get("fix_pattern")
            how = f"fixed by `{fixed}`" if taxonomy.is_established("fix_pattern", fixed) else "fix not established"
            symptom = n.labels.get("symptom")
            what = f"`{symptom}`, " if symptom else ""
            lines.append(f"- [{escape_markdown(n.id, 60)}]({n.url}) {escape_markdown(n.title or '', 90)} "
                         f"({what}{how}; similarity {n.score:.2f})")
    facts = result.environment.known()
    if facts:
        lines += ["", "**Environment found in the issue:** " +
                  ", ".join(f"{k.replace('_', ' ')} {escape_markdown(v, 40)}" for k, v in facts.items())]
    if result.fallback:
        lines += ["", f"<sub>The LLM answer was not usable ({escape_markdown(result.fallback, 100)}); "
                      "this suggestion comes from the embedding classifier.</sub>"]
    lines += ["", FOOTER]
    return "\n".join(lines) + "\n"
