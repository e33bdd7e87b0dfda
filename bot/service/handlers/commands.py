"""`/triage` in an issue comment: a re-run, or corrections, from someone whose role may triage."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from bot.service.github.models import TRIAGE_ROLES, WebhookEvent
from bot.service.handlers.config_file import usable_config
from bot.service.handlers.context import JobContext
from bot.service.handlers.feedback import record_corrections, validate_corrections
from bot.service.handlers.router import Router
from bot.service.handlers.triage import triage_issue

log = logging.getLogger(__name__)

router = Router()

COMMAND = re.compile(r"^[ \t]*/triage(?:[ \t]+(?P<args>[^\n]*))?[ \t]*$", re.MULTILINE)
# Without API access the payload's association is the only hint of who may command the bot, and only OWNER is
# sure: a MEMBER of the organisation or a COLLABORATOR may hold the read role alone (fail closed).
TRUSTED_ASSOCIATIONS = frozenset({"OWNER"})


@dataclass(frozen=True)
class TriageCommand:
    """A `/triage` line: corrections as typed (`axis=value`), and the words that were not corrections."""

    corrections: dict[str, str] = field(default_factory=dict)
    unparsed: tuple[str, ...] = ()


def parse_command(body: str) -> TriageCommand | None:
    """The first `/triage` command of a comment, or None when there is none."""
    match = COMMAND.search(body or "")
    if match is None:
        return None
    corrections: dict[str, str] = {}
    unparsed: list[str] = []
    for word in (match.group("args") or "").split():
        axis, sep, value = word.partition("=")
        if sep and axis and value:
            corrections[axis.strip().lower()] = value.strip()
        else:
            unparsed.append(word)
    return TriageCommand(corrections, tuple(unparsed))


@router.register("issue_comment", "created")
def handle_comment(ctx: JobContext, event: WebhookEvent) -> str:
    command = parse_command(event.comment.body) if event.comment else None
    if command is None or event.comment is None:
        return "no command"
    author = event.comment.author
    if not may_command(ctx, event):
        log.info("ignoring /triage from %s: their role may not triage", author)
        return "command without a triage role"
    corrections, problems = validate_corrections(command.corrections, ctx.engine.taxonomy)
    for problem in [*problems, *(f"not an axis=value pair: {w!r}" for w in command.unparsed)]:
        log.warning("/triage from %s: %s", author, problem)
    if (command.corrections or command.unparsed) and not corrections:
        return "invalid command"
    if corrections:
        # The repository turned the bot off, or its config is unusable: learn nothing there.
        config = usable_config(ctx, event.repo)
        if isinstance(config, str):
            return config
        record_corrections(ctx.state.store, ctx.delivery_id, event, author, corrections, ctx.started_at)
    # Asked for by someone with write access: answered on a member's issue too (the rest of the policy holds).
    return triage_issue(ctx, event, requested=True)


def may_command(ctx: JobContext, event: WebhookEvent) -> bool:
    """A role that may triage (read through the API), or the repository's owner when there is no API access."""
    assert event.comment is not None
    if ctx.client is not None:
        return ctx.client.role_of(event.repo, event.comment.author) in TRIAGE_ROLES
    return event.comment.author_association in TRUSTED_ASSOCIATIONS
