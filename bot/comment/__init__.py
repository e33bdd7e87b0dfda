"""The suggestion comment: what a maintainer reads, or silence.

`compose_comment(issue, result, taxonomy, policy, author_association=..., chat=...)` is the one entry point:
markdown to post, or None. The parts live by concern: `precedents` (the issues it leads with), `links` (forms
that never ping another project), `rows` (labels in words), `policy` (when to speak), `reading` (the LLM's
validated sentences), `markdown` (escaping, the hidden marker).
"""

from bot.comment.compose import (
    ASK_MISSING,
    NEEDS_DETAILS,
    CommentPlan,
    compose,
    compose_comment,
    plan_comment,
    render_plan,
)
from bot.comment.markdown import FOOTER, MARKER_PATTERN, MARKER_PREFIX, escape_markdown, has_marker, marker, percent
from bot.comment.policy import MEMBER_ASSOCIATIONS, CommentPolicy, Substance, should_comment, silence_reason

__all__ = ["ASK_MISSING", "FOOTER", "MARKER_PATTERN", "MARKER_PREFIX", "MEMBER_ASSOCIATIONS", "NEEDS_DETAILS",
           "CommentPlan", "CommentPolicy", "Substance", "compose", "compose_comment", "escape_markdown", "has_marker",
           "marker", "percent", "plan_comment", "render_plan", "should_comment", "silence_reason"]
