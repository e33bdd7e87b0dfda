"""What a title and an issue template say about the kind of report, before a word of the problem is read.

A maintainer tells a question from a bug report at a glance: "How to ...", "Is it possible ...", a trailing
"?", a "[QUESTION]" or "[FEATURE]" tag, the feature-request template's "Describe the solution you'd like".
These cues are features here. The templates' section headings are also recognised so that the normaliser can
drop them from the text the embedding reads (every bug report of a repository starts with the same headings,
which pulls unrelated reports together) while the kind of template they came from survives as a cue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

# Title cues: case-insensitive patterns on the title alone.
TITLE_CUES: dict[str, str] = {
    "tag_bug": r"^\W*\[\s*bug\b",
    "tag_question": r"^\W*\[\s*(?:question|q|help|discussion|usage)\b",
    "tag_feature": r"^\W*\[\s*(?:feature|request|feature request|enhancement|rfc|proposal|new model)\b",
    "tag_docs": r"^\W*\[\s*(?:docs?|documentation)\b",
    "how_to": r"\bhow (?:to|can|do|does|should|would|is|are)\b",
    "is_it_possible": r"\b(?:is it possible|is there (?:a|an|any)|does \S+(?: \S+){0,4} support|can (?:i|we|you)|"
                      r"could (?:i|we|you)|whether)\b",
    "question_word": r"\bquestions?\b|\bconfus|\bclarif|\bunderstand",
    "wh_start": r"^\W*(?:\[[^\]]*\]\W*)?(?:why|what|which|where|when|who|is|are|does|do|should|can)\b",
    "question_mark": r"[?？]\s*$",
    "docs_word": r"\b(?:docs?|documentation|readme|typo|tutorials?|docstring|comment)\b",
    "request_word": r"\b(?:support(?:s|ing)? for|please add|add support|would be (?:nice|great)|feature|plan to)\b",
    "fix_prefix": r"^\W*(?:\[?hot)?fix(?:es|ed)?\b",
}
_TITLE = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in TITLE_CUES.items()}
# Body cues: how a question, a request or a documentation report is phrased when the title does not say it.
BODY_CUES: dict[str, str] = {
    "body_question": r"\b(?:is there (?:a|an|any) (?:way|option|plan)|i (?:wonder|was wondering)|i want to know|"
                     r"(?:could|can) (?:you|someone|anyone) (?:please )?(?:explain|tell|clarify)|what is the "
                     r"(?:difference|purpose|meaning|reason)|how (?:can|do|should) (?:i|we)|any (?:suggestions?|"
                     r"advice|ideas)\b|my question is)",
    "body_request": r"\b(?:it would be (?:nice|great|helpful)|would like to (?:see|have)|please (?:add|support|"
                    r"consider)|feature request|we propose|this pr (?:adds|introduces|supports))\b",
    "body_docs": r"\b(?:the (?:docs?|documentation|tutorial|readme|docstring)s? (?:is|are|says?|seems?|should)|in the "
                 r"(?:docs?|documentation|readme|tutorial)|typo)\b",
}
_BODY = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in BODY_CUES.items()}

# The section headings of the frameworks' issue and pull-request templates (DeepSpeed, Megatron-LM,
# Colossal-AI, PyTorch-style), as the kind of template each belongs to. Matched on a heading line's words,
# without its markdown, emoji or trailing colon.
TEMPLATE_HEADINGS: dict[str, tuple[str, ...]] = {
    "bug": ("describe the bug", "bug", "bug report", "to reproduce", "steps to reproduce", "expected behavior",
            "expected behaviour", "actual behavior", "current behavior", "describe the current behavior",
            "describe the expected behavior", "stack trace/logs", "stack trace", "logs", "error message",
            "ds_report output", "system info", "launcher context", "docker context", "steps/code to reproduce bug",
            "reproduction", "is there an existing issue for this", "is there an existing issue for this bug",
            "the bug has not been fixed in the latest main branch", "describe the regression",
            "previous performance", "new performance", "proposed fix"),
    "feature": ("is your feature request related to a problem", "describe the solution you'd like",
                "describe alternatives you've considered", "describe the feature", "motivation", "proposal",
                "proposed implementation", "feature request", "pitch", "alternatives"),
    "question": ("your question", "question", "what is your question", "ask a question"),
    "docs": ("the doc issue", "suggest a potential alternative/fix", "documentation", "doc issue",
             "describe the documentation issue"),
    "pull_request": ("what does this pr do", "issue tracking", "contribution process",
                     "pre-checks", "code review", "changelog", "before your pr is ready for review",
                     "test plan", "checklist before creating the pr", "issue number",
                     "checklist before requesting a review", "backward compatibility", "related issues",
                     "do you enjoy contributing to colossal-ai"),
    # Headings every template shares: dropped from the text, but they say nothing about the kind.
    "": ("additional context", "additional information", "screenshots", "description", "summary", "environment",
         "system information", "versions", "checklist"),
}
_HEADING_LINE = re.compile(r"^\s*(?:#{1,6}\s+(?P<hash>.+?)|\*\*(?P<bold>[^*]{2,80})\*\*:?|(?P<plain>[A-Z][^.!]{2,60}):)"
                           r"\s*$")
_HEADING_OF = {heading: kind for kind, headings in TEMPLATE_HEADINGS.items() for heading in headings}
TEMPLATE_KINDS = tuple(kind for kind in TEMPLATE_HEADINGS if kind)


def _heading_words(text: str) -> str:
    """A heading's words: no emoji, markdown, punctuation at the ends, or "(please complete ...)" asides."""
    text = re.sub(r"\(please [^)]*\)|\(optional\)|\(required\)|please describe\.?", "", text, flags=re.IGNORECASE)
    text = re.sub(r"[^\w\s'/?.,-]", " ", text)
    return " ".join(text.lower().split()).strip(" ?.:,-")


def template_heading(line: str) -> str | None:
    """The kind of template (`bug`, `feature`, ...) whose section heading `line` is ("" for a heading all
    templates share), or None when the line is no template heading."""
    match = _HEADING_LINE.match(line)
    if not match:
        return None
    words = _heading_words(match.group("hash") or match.group("bold") or match.group("plain") or "")
    return _HEADING_OF.get(words)


def title_cues(title: str) -> set[str]:
    """The names of the title cues the title shows."""
    return {name for name, rx in _TITLE.items() if rx.search(title or "")}


CUE_NAMES: tuple[str, ...] = (*TITLE_CUES, *BODY_CUES, *(f"template_{kind}" for kind in TEMPLATE_KINDS))


def cue_flags(titles: Sequence[str], templates: Sequence[Iterable[str]], bodies: Sequence[str] | None = None
              ) -> np.ndarray:
    """One 0/1 column per cue (CUE_NAMES order): title cues, body cues, then the template kinds the body's
    headings showed."""
    rows = np.zeros((len(titles), len(CUE_NAMES)), dtype=np.float32)
    column = {name: i for i, name in enumerate(CUE_NAMES)}
    for row, (title, kinds, body) in enumerate(zip(titles, templates, bodies or [""] * len(titles), strict=True)):
        for name in title_cues(title) | {name for name, rx in _BODY.items() if rx.search(body)}:
            rows[row, column[name]] = 1.0
        for kind in kinds:
            if kind:
                rows[row, column[f"template_{kind}"]] = 1.0
    return rows
