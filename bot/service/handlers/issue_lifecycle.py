"""The issue lifecycle keeps the repository memory current: closed, labelled, deleted, transferred (opened,
edited and reopened issues are remembered by the triage job, through `remember_from_delivery`). Nothing is
stored of a repository whose config turns the bot off."""

from __future__ import annotations

import logging
from typing import Any

from bot.memory.records import embed_records, memory_issue
from bot.service.errors import NotFound, PermanentGitHubError
from bot.service.github.models import WebhookEvent
from bot.service.handlers.config_file import disabled, repo_enabled
from bot.service.handlers.context import JobContext, payload_of
from bot.service.handlers.router import Router
from bot.service.retention.erasure import erase_issue

log = logging.getLogger(__name__)

router = Router()


def remember_issue(ctx: JobContext, repo: str, data: dict[str, Any]) -> None:
    """Upsert one issue JSON into the memory (with what closed it, when it is closed and a client can tell)."""
    closed_by = duplicate_of = None
    if data.get("state") == "closed" and ctx.client is not None:
        try:
            closed_by, duplicate_of = ctx.client.closing_reference(repo, int(data["number"]))
        except (NotFound, PermanentGitHubError) as exc:
            log.warning("timeline of %s#%s not read: %s", repo, data["number"], exc)
    # Through the index: the issue joins the loaded matrix, so the next search reloads nothing.
    ctx.state.memory.index.save([(memory_issue(repo, data, closed_by, duplicate_of),
                                  embed_records(ctx.engine.embedder, [data])[0])], unless_erased_since=ctx.started_at)


@router.register("issues", "closed", "labeled", "unlabeled")
def handle_issue_change(ctx: JobContext, event: WebhookEvent) -> str:
    if not repo_enabled(ctx, event.repo):
        return disabled(ctx)
    remember_issue(ctx, event.repo, payload_of(ctx)["issue"])
    return f"memory updated ({event.action})"


@router.register("issues", "deleted")
def handle_issue_deleted(ctx: JobContext, event: WebhookEvent) -> str:
    # Forgetting is allowed, even when disabled: the memory's row, decisions and corrections about the issue.
    erased = erase_issue(ctx.state.store, ctx.state.memory, event.repo, event.number)
    log.info("deleted issue erased", extra={"repo": event.repo, "number": event.number} | erased)
    return "memory updated (deleted)"


@router.register("issues", "transferred")
def handle_issue_transferred(ctx: JobContext, event: WebhookEvent) -> str:
    """Gone from this repository; remembered in the new one only if that one has a memory (is installed)
    and has not turned the bot off."""
    memory = ctx.state.memory
    memory.store.delete_issue(event.repo, event.number)
    changes = payload_of(ctx).get("changes") or {}
    new_repo = str((changes.get("new_repository") or {}).get("full_name") or "")
    new_issue = changes.get("new_issue")
    if new_repo and isinstance(new_issue, dict) and memory.store.cursor(new_repo) is not None \
            and repo_enabled(ctx, new_repo):
        remember_issue(ctx, new_repo, new_issue)
    return "memory updated (transferred)"


def remember_from_delivery(ctx: JobContext, event: WebhookEvent) -> None:
    """An opened, edited or reopened issue joins (or updates) its repository's memory at once (the triage
    job calls this once it has read the repository's config: not for a repository that turned the bot off)."""
    if event.event == "issues":
        remember_issue(ctx, event.repo, payload_of(ctx)["issue"])
