"""Installation events: an installed repository's history is synced into the memory (unless its config
turns the bot off); everything of an uninstalled one is erased, without asking GitHub anything."""

from __future__ import annotations

import json
import logging
from typing import Any

from bot.memory.sync import sync_repository
from bot.service.github.models import WebhookEvent
from bot.service.handlers.config_file import load_repo_config
from bot.service.handlers.context import JobContext, payload_of
from bot.service.handlers.router import Router
from bot.service.queue.erasure import erase_repositories

log = logging.getLogger(__name__)

router = Router()


@router.register("installation", "created")
@router.register("installation_repositories", "added")
def handle_installed(ctx: JobContext, event: WebhookEvent) -> str:
    """Sync each repository a slice of pages at a time; unfinished ones are queued again as a new job."""
    if ctx.client is None:
        return "no credentials to sync with"
    payload = payload_of(ctx)
    repos = repo_names(payload, "repositories" if event.event == "installation" else "repositories_added")
    if not repos:  # "all repositories" installations may list none in the payload
        repos = ctx.client.installation_repositories()
    memory, settings = ctx.state.memory, ctx.state.settings
    unfinished = []
    for repo in repos:
        cursor = memory.store.cursor(repo)
        if cursor is not None and cursor.status == "done":
            continue
        if not load_repo_config(ctx.client, repo, ctx.engine.taxonomy).enabled:
            log.info("history sync of %s skipped: its config turns the bot off", repo, extra={"repo": repo})
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
    """Everything of the uninstalled repositories goes: the memory's issues, vectors (the embedding cache's
    too), sync cursors and cached titles; decisions, corrections, stored deliveries and their jobs. The
    client is never used: GitHub refuses a token for a deleted installation."""
    payload = payload_of(ctx)
    deleted = event.event == "installation"
    repos = set(repo_names(payload, "repositories" if deleted else "repositories_removed"))
    memory = ctx.state.memory
    if deleted:  # every repository this installation synced, whether or not the payload lists it
        repos |= {c.repo for c in memory.store.cursors() if c.installation_id == event.installation_id}
    hashes = [digest for repo in sorted(repos) for digest in memory.forget_repo(repo)]
    ctx.engine.embedder.forget(hashes)
    erased = erase_repositories(ctx.state.store, repos, ctx.delivery_id,
                                event.installation_id if deleted else None)
    log.info("%d uninstalled repositories erased", len(repos), extra={"issues": len(hashes)} | erased)
    return f"{len(repos)} repositories erased"


def repo_names(payload: dict[str, Any], key: str) -> list[str]:
    """The full names an installation payload lists under `key`."""
    return [str(r["full_name"]) for r in payload.get(key) or [] if isinstance(r, dict) and "full_name" in r]
