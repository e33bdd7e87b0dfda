"""The labels a comment states, in words, on one line: fewer and surer.

Maintainers judged tables of "not sure" rows and speculative cause / fix advice noise. So: an axis only when
its calibrated confidence clears its threshold (never a "not sure" row); the kind only when the issue is not
a bug report; a symptom or stage that the diagnosis shown names otherwise is left out (the error's own words
outrank the guess); root cause and fix pattern only when a diagnosis of the error or a precedent shown above
backs them, and the line says which. A maintainer's correction is always shown, as theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.comment.precedents import Precedent
from bot.core.domain import Diagnosis, TriageResult
from bot.knowledge.facts import NON_BUG_KINDS
from bot.knowledge.taxonomy import Taxonomy

CORRECTED = "set by a maintainer"


@dataclass(frozen=True)
class Row:
    axis: str
    label: str
    backing: str | None = None  # "as in #4321", "from the error: <diagnosis>", "set by a maintainer"


def select_rows(result: TriageResult, taxonomy: Taxonomy, axes: tuple[str, ...], precedents: list[Precedent],
                diagnosis: Diagnosis | None) -> list[Row]:
    """The axes worth stating, each with what backs it."""
    kind = result.predictions["kind"]
    if kind.label in NON_BUG_KINDS:  # a question or a request: what it is, nothing about a failure
        return [Row("kind", kind.label, CORRECTED if kind.corrected else None)] if "kind" in axes else []
    rows: list[Row] = []
    for axis in ("symptom", "stage"):
        pred = result.predictions[axis]
        if pred.label and pred.label != "none" and (pred.corrected or not _contradicts(axis, pred.label, diagnosis)):
            rows.append(Row(axis, pred.label, CORRECTED if pred.corrected else None))
    if [row.axis for row in rows] == ["stage"] and not result.predictions["stage"].corrected:
        rows = []  # "stage: training" alone tells a maintainer nothing the report does not
    rows += [row for axis in ("root_cause", "fix_pattern")
             if (row := _backed(axis, result, taxonomy, precedents, diagnosis))]
    return [row for row in rows if row.axis in axes]


def _contradicts(axis: str, label: str, diagnosis: Diagnosis | None) -> bool:
    """Whether the diagnosis the comment shows names other labels on this axis: a "Likely: tensor shape or dtype
    mismatch" under a next step that reads Transformer Engine's fused-attention cuDNN error makes a maintainer
    trust neither, so the guess yields."""
    if diagnosis is None:
        return False
    # The diagnosis's first symptom is the one its reading explains: "crash in native code" beside the OOM-killer
    # reading of exit code -9 contradicts it even though the entry names a native crash as possible.
    named = diagnosis.symptoms[:1] if axis == "symptom" else [diagnosis.stage] if diagnosis.stage else []
    return bool(named) and label not in named


def _backed(axis: str, result: TriageResult, taxonomy: Taxonomy, precedents: list[Precedent],
            diagnosis: Diagnosis | None) -> Row | None:
    pred = result.predictions[axis]
    if pred.corrected and pred.label:
        return Row(axis, pred.label, CORRECTED)
    established = getattr(diagnosis, axis, None) if diagnosis else None
    if established and taxonomy.canonical(axis, established):
        return Row(axis, established, f"from the error: {diagnosis.title}" if diagnosis else None)
    label = pred.label
    if not label or label == "none" or not taxonomy.is_established(axis, label):
        return None
    backing = next((p for p in precedents if p.label(axis) == label), None)
    return Row(axis, label, f"as in {backing.link}") if backing else None


def render_rows(rows: list[Row], taxonomy: Taxonomy) -> list[str]:
    """One line: "**Likely:** hang or timeout (stage: training); cause: ... (as in #4321); fix: ..."."""
    if not rows:
        return []
    words = {row.axis: _words(row, taxonomy) for row in rows}
    if "kind" in words:
        return [f"**Likely:** a {words['kind']}."]
    head = [words["symptom"]] if "symptom" in words else []
    if "stage" in words:
        head.append(f"(stage: {words['stage']})" if head else f"stage: {words['stage']}")
    parts = [" ".join(head)] if head else []
    parts += [f"{name}: {words[axis]}" for axis, name in (("root_cause", "cause"), ("fix_pattern", "fix"))
              if axis in words]
    return ["**Likely:** " + "; ".join(parts) + "."]


def _words(row: Row, taxonomy: Taxonomy) -> str:
    text = taxonomy.words(row.axis, row.label)
    return f"{text} ({row.backing})" if row.backing else text
