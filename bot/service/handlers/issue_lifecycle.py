"""The issue lifecycle keeps the repository memory current: closed, labelled, deleted, transferred (opened,
edited and reopened issues are remembered by the triage job, through `remember_from_delivery`). Nothing is
stored of a repository whose config turns the bot off."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from bot.memory.records import memory_record
from bot.service.errors import NotFound, PermanentGitHubError
from bot.service.github.issues import listed_issue
from bot.service.github.models import WebhookEvent
from bot.service.github.payloads import transfer_target
from bot.service.handlers.config_file import usable_config
from bot.service.handlers.context import JobContext, payload_of
from bot.service.handlers.router import Router
from bot.service.retention.erasure import erase_issue, forget_payload

log = logging.getLogger(__name__)

router = Router()


def remember_issue(ctx: JobContext, repo: str, data: dict[str, Any]) -> None:
    """Upsert one issue JSON into the memory (with what closed it, when it is closed and a client can tell)."""
    issue = listed_issue(data)
    closed_by = duplicate_of = None
    if issue.state == "closed" and ctx.client is not None:
        try:
            closed_by, duplicate_of = ctx.client.closing_reference(repo, issue.number)
        except (NotFound, PermanentGitHubError) as exc:
            log.warning("timeline of %s#%s not read: %s", repo, issue.number, exc)
    # Through the index: the issue joins the loaded matrix, so the next search reloads nothing.
    record, text = memory_record(repo, issue, closed_by, duplicate_of)
    written = ctx.state.memory.index.save([(record, ctx.engine.embedder.embed([text])[0])],
                                          unless_erased_since=ctx.started_at)
    ctx.engine.embedder.forget(written.erased)  # erased while this job ran: its vector goes too


@router.register("issues", "closed", "labeled", "unlabeled")
def handle_issue_change(ctx: JobContext, event: WebhookEvent) -> str:
    config = usable_config(ctx, event.repo)
    if isinstance(config, str):
        return config
    remember_issue(ctx, event.repo, payload_of(ctx)["issue"])
    return f"memory updated ({event.action})"


@router.register("issues", "deleted")
def handle_issue_deleted(ctx: JobContext, event: WebhookEvent) -> str:
    # Forgetting is allowed, even when disabled: the memory's row, decisions and corrections about the issue.
    erased = erase_issue(ctx.state.store, ctx.state.memory, ctx.engine.embedder, event.repo, event.number)
    log.info("deleted issue erased", extra={"repo": event.repo, "number": event.number} | erased)
    return "memory updated (deleted)"


@router.register("issues", "transferred")
def handle_issue_transferred(ctx: JobContext, event: WebhookEvent) -> str:
    """Gone from this repository; remembered in the new one only if that one has a memory (is installed) and
    its config, read as the installation that holds it (another one, perhaps), can be read and lets the bot
    work there: a config that cannot be read keeps the issue out (fail closed)."""
    memory = ctx.state.memory
    # Its vectors go with it (the new repository's memory embeds it again, if it remembers it at all).
    ctx.engine.embedder.forget(memory.store.delete_issue(event.repo, event.number))
    new_repo, new_issue = transfer_target(payload_of(ctx))
    target = memory.store.cursor(new_repo) if new_repo else None
    if target is None or new_issue is None:
        return "memory updated (transferred)"
    try:
        as_target = acting_for(ctx, target.installation_id, event.installation_id)
        config = usable_config(as_target, new_repo)
    except PermanentGitHubError as exc:  # the other installation's token, or its config, is refused
        log.warning("transferred issue not remembered in %s: its config cannot be read (%s)", new_repo, exc,
                    extra={"repo": new_repo})
        forget_payload(ctx.state.store, ctx.delivery_id)
        return f"memory updated (transferred; {new_repo}: config unreadable)"
    if isinstance(config, str):
        return f"memory updated (transferred; {new_repo}: {config})"
    remember_issue(as_target, new_repo, new_issue)
    return "memory updated (transferred)"


def acting_for(ctx: JobContext, installation_id: int | None, current: int | None) -> JobContext:
    """The job's context as the installation that holds another repository (the same context when it is the
    delivery's own, or without App credentials)."""
    if ctx.state.github is None or installation_id is None or installation_id == current:
        return ctx
    client = ctx.state.github.installation(installation_id)
    # Its token is bought here, not inside the config read, where a refused token (a 404 for an installation
    # that is gone) would read as "no file": the defaults.
    client.installation_repositories()
    return replace(ctx, client=client)


def remember_from_delivery(ctx: JobContext, event: WebhookEvent) -> None:
    """An opened, edited or reopened issue joins (or updates) its repository's memory at once (the triage
    job calls this once it has read the repository's config: not for a repository that turned the bot off)."""
    if event.event == "issues":
        remember_issue(ctx, event.repo, payload_of(ctx)["issue"])
