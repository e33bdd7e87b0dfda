"""The LLM's reading of the error, when one is configured: one or two sentences, validated, or nothing.

The model sees the issue (hostile text, fenced), the precedents and the diagnoses the comment already shows,
and nothing else. Its answer is checked before it is shown: at most 300 characters, no @-mention, no URL or
link of its own, no issue reference beyond the `#N` links already in the comment. One retry names what was
wrong; after that, or on any error of the backend, the diagnosis's own text stands.
"""

from __future__ import annotations

import logging
import re

from bot.core.domain import Diagnosis, Issue
from bot.core.settings import Settings
from bot.knowledge.prompts import load_prompt
from bot.models.llm.base import ChatModel, Message, make_chat_model
from bot.reading.normalise import NormalisedIssue, normalise

log = logging.getLogger(__name__)

READING_PROMPT = "reading-v1"
MAX_READING_CHARS = 300
MAX_PROMPT_BODY = 3000  # the head of the normalised issue (title, error lines, prose) is what matters
MAX_TOKENS = 120
_MENTION = re.compile(r"@[\w-]")
_LINKISH = re.compile(r"https?:|www\.|\]\(|<|>|\b[\w-]+\.(?:com|org|net|io|ai|dev|co)\b", re.IGNORECASE)
_OTHER_REPO_REFERENCE = re.compile(r"[\w.-]+/[\w.-]+#\d+")
_REFERENCE = re.compile(r"#(\d+)\b")


def reading_model(settings: Settings) -> ChatModel | None:
    """The LLM that writes the comment's reading of the error, when one is configured (DDL_TRIAGE_LLM)."""
    return make_chat_model(settings.llm, settings) if settings.llm else None


class ReadingRejected(ValueError):
    """The model's answer cannot be shown; the message says why (it is sent back once as the retry)."""


def validate_reading(answer: str, references: frozenset[str]) -> str:
    """The answer as one line, or ReadingRejected naming the first rule it breaks."""
    text = " ".join(answer.split()).strip("\"' ")
    if not text:
        raise ReadingRejected("the answer was empty")
    if len(text) > MAX_READING_CHARS:
        raise ReadingRejected(f"the answer has {len(text)} characters; at most {MAX_READING_CHARS} are allowed")
    if _MENTION.search(text):
        raise ReadingRejected("the answer @-mentions someone")
    if _LINKISH.search(text) or _OTHER_REPO_REFERENCE.search(text):
        raise ReadingRejected("the answer contains a link, a URL or HTML")
    unknown = {f"#{n}" for n in _REFERENCE.findall(text)} - references
    if unknown:
        raise ReadingRejected(f"the answer cites {sorted(unknown)}, which the comment does not link")
    if text.startswith(("#", "-", "*", ">", "|", "=")):
        raise ReadingRejected("the answer starts with markdown structure")
    return text


def write_reading(chat: ChatModel, issue: Issue, precedent_lines: list[str], diagnoses: list[Diagnosis],
                  references: frozenset[str], normalised: NormalisedIssue | None = None) -> str | None:
    """The model's reading, validated; None (the diagnosis's text stands) on any failure. `normalised`: the
    issue as the triage read it (else it is read here)."""
    prompt = load_prompt(READING_PROMPT)
    normalised = normalised or normalise(issue)
    system, user = prompt.render(
        title=normalised.title, body=normalised.body[:MAX_PROMPT_BODY],
        precedents="\n".join(precedent_lines) or "(none)",
        diagnoses="\n".join(f"- {d.title}: {d.reading} Next step: {d.next_step}" for d in diagnoses) or "(none)",
        references=", ".join(sorted(references)) or "(none: cite no issue)")
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for attempt in range(2):
        try:
            answer = chat.complete(messages, schema=None, max_tokens=MAX_TOKENS).text
            return validate_reading(answer, references)
        except ReadingRejected as exc:
            log.info("reading rejected (attempt %d): %s", attempt + 1, exc)
            messages += [{"role": "assistant", "content": answer},
                         {"role": "user", "content": prompt.render_retry(str(exc), "")}]
        except Exception as exc:  # a failing backend costs the reading, never the comment
            log.warning("reading not written: %s: %s", type(exc).__name__, exc)
            return None
    return None
