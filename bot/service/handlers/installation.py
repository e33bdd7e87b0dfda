"""Installation events: an installed repository's history is synced into the memory; an uninstalled one is
forgotten."""

from __future__ import annotations

import json
import logging

from bot.memory.sync import sync_repository
from bot.service.github.models import WebhookEvent
from bot.service.handlers.context import JobContext, memory_of, payload_of
from bot.service.handlers.router import Router

log = logging.getLogger(__name__)

router = Router()


@router.register("installation", "created")
@router.register("installation_repositories", "added")
def handle_installed(ctx: JobContext, event: WebhookEvent) -> str:
    """Sync each repository a slice of pages at a time; unfinished ones are queued again as a new job."""
    if ctx.client is None:
        return "no credentials to sync with"
    payload = payload_of(ctx)
    key = "repositories" if event.event == "installation" else "repositories_added"
    repos = [str(r["full_name"]) for r in payload.get(key) or [] if isinstance(r, dict) and "full_name" in r]
    if not repos:  # "all repositories" installations may list none in the payload
        repos = ctx.client.installation_repositories()
    memory, settings = memory_of(ctx), ctx.state.settings
    unfinished = []
    for repo in repos:
        cursor = memory.store.cursor(repo)
        if cursor is not None and cursor.status == "done":
            continue
        cursor = sync_repository(ctx.client, memory.store, ctx.engine.embedder, repo,
                                 installation_id=event.installation_id,
                                 max_pages=settings.memory_sync_pages_per_job,
                                 page_interval_s=settings.memory_page_interval_s)
        if cursor.status != "done":
            unfinished.append(f"{repo}@{cursor.page}")
    if unfinished:  # the rest is a new job, so triage jobs are not held up behind a long history
        # One id per slice (a retried job re-queues nothing twice); rooted at the original delivery id.
        more = f"{ctx.delivery_id.split('/sync/')[0]}/sync/{'+'.join(unfinished)}"
        ctx.state.store.record_delivery(more, event.event, event.action, json.dumps(payload), event.issue_key)
        ctx.state.wake_worker.set()
        return f"history sync continues for {len(unfinished)} repositories"
    return f"history of {len(repos)} repositories synced"


@router.register("installation", "deleted")
@router.register("installation_repositories", "removed")
def handle_uninstalled(ctx: JobContext, event: WebhookEvent) -> str:
    """An uninstalled repository's memory is deleted: issues, vectors and sync cursor."""
    payload = payload_of(ctx)
    key = "repositories" if event.event == "installation" else "repositories_removed"
    repos = [str(r["full_name"]) for r in payload.get(key) or [] if isinstance(r, dict) and "full_name" in r]
    memory = memory_of(ctx)
    removed = sum(memory.forget_repo(repo) for repo in repos)
    log.info("memory of %d repositories deleted (%d issues)", len(repos), removed, extra={"repos": repos})
    return f"memory of {len(repos)} repositories deleted"
