"""What the queue shows of a decision: its comment rendered as GitHub would render it (markdown to sanitised
HTML), or why it stayed silent; the reasons it spoke, the labels with their confidence, the precedents."""

from __future__ import annotations

from functools import cache
from typing import Any

import nh3
from markdown_it import MarkdownIt
from pydantic import BaseModel

from bot.comment.links import issue_html_url
from bot.service.decisions.models import Decision
from bot.service.review.records import Rating

# The outcome filter: what a decision did, by the queue's words.
POSTED, SHADOW, SILENT = "posted", "shadow", "silent"
OUTCOMES = {POSTED: "posted", SHADOW: "would post (shadow)", SILENT: "silent"}
PRECEDENTS = 5  # the nearest labelled cases listed under a decision (the comment shows those it cites)


@cache
def _markdown() -> MarkdownIt:
    # GitHub's flavour as far as it matters here: tables, strikethrough, inline HTML (then sanitised).
    return MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """Markdown to HTML that is safe to inline: the comment quotes issue text, so only a safe subset of tags
    and attributes stays (no script, no style, no event handler; links get rel=noopener)."""
    return nh3.clean(_markdown().render(text), link_rel="noopener noreferrer nofollow")


def outcome_of(decision: Decision) -> str:
    if decision.posted:
        return POSTED
    if decision.comment is not None:
        return SHADOW
    return SILENT


class LabelShown(BaseModel):
    axis: str
    label: str | None
    confidence: float
    corrected: bool


class Row(BaseModel):
    """One decision in the queue, ready for the template."""

    delivery_id: str
    repo: str
    number: int
    title: str
    url: str
    created_at: float
    outcome: str  # POSTED, SHADOW or SILENT
    detail: str  # the job's own words: "comment created", "silent: opened by a member", ...
    comment_html: str | None
    reasons: list[str]
    labels: list[LabelShown]
    precedents: list[dict[str, Any]]
    related: list[dict[str, Any]]
    rating: Rating
    approved_by: str | None
    corrections: dict[str, str]

    @property
    def postable(self) -> bool:
        return self.outcome == SHADOW


def row_of(decision: Decision, api_url: str, rating: Rating | None, corrections: dict[str, str],
           html: str | None) -> Row:
    """`html`: the comment rendered (`html_cache.py`); None when the decision stayed silent."""
    # Built without validation (model_construct): every value is read from a stored decision, typed here.
    labels = [LabelShown.model_construct(axis=axis, label=_str(p.get("label")),
                                         confidence=float(p.get("confidence") or 0.0),  # type: ignore[arg-type]
                                         corrected=bool(p.get("corrected")))
              for axis, p in decision.predictions.items()]
    return Row.model_construct(delivery_id=decision.delivery_id, repo=decision.repo, number=decision.number,
               title=decision.title or f"issue #{decision.number}",
               url=issue_html_url(api_url, decision.repo, decision.number), created_at=decision.created_at,
               outcome=outcome_of(decision), detail=decision.outcome,
               comment_html=html if decision.comment is not None else None,
               reasons=decision.reasons, labels=labels, precedents=decision.neighbours[:PRECEDENTS],
               related=decision.related,
               rating=rating or Rating(), approved_by=decision.approved_by, corrections=corrections)


def matches(decision: Decision, outcome: str | None, axis: str | None, value: str | None) -> bool:
    """The queue's filters: by outcome (posted, shadow, silent, or one silent reason) and by an axis's label."""
    if outcome:
        if outcome.startswith("silent:"):
            if decision.outcome != outcome:
                return False
        elif outcome_of(decision) != outcome:
            return False
    if axis:
        shown = _str((decision.predictions.get(axis) or {}).get("label"))
        if value and shown != value:
            return False
        if not value and shown is None:
            return False
    return True


def _str(value: object) -> str | None:
    return None if value is None else str(value)
