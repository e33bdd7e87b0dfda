"""Markdown pieces every part of the comment shares: inert outside text, the hidden marker, the footer."""

from __future__ import annotations

import math
import re

from bot.core.domain import TriageResult
from bot.core.settings import AXES

MARKER_PREFIX = "<!-- ddl-triage v1"
MARKER_PATTERN = re.compile(r"<!-- ddl-triage v1\b[^>]*-->")
FOOTER = "<sub>Automated suggestion by ddl-triage; it changes nothing. Correct it: `/triage symptom=...`.</sub>"
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


def code_span(text: str, limit: int = 160) -> str:
    """Outside text (an error signature) as one inline code span: GitHub renders nothing inside it."""
    text = " ".join(text.split()).replace("`", "'")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"`{text}`"


def marker(result: TriageResult) -> str:
    """The hidden marker: finds the comment again, and keeps the label ids that the text shows in words."""
    labels = ",".join(f"{axis}:{result.predictions[axis].label}" for axis in AXES
                      if axis in result.predictions and result.predictions[axis].label)
    return (f"{MARKER_PREFIX} taxonomy={result.taxonomy_version} model={result.model_id} "
            f"predictor={result.predictor}" + (f" labels={labels}" if labels else "") + " -->")


def has_marker(body: str | None) -> bool:
    return bool(body and MARKER_PATTERN.search(body))


def percent(confidence: float) -> str:
    """A calibrated confidence as shown: whole percent, never 0% or 100%."""
    return f"{min(99, max(1, math.floor(confidence * 100)))}%"
