"""Installation events: an installed repository's history is synced into the memory (unless its config
turns the bot off); everything of an uninstalled one is erased, without asking GitHub anything."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from bot.memory.store import MemoryStore, SyncCursor
from bot.memory.sync import PageBudget, ReadsExhausted, sync_repository
from bot.service.errors import RateLimited
from bot.service.github.models import WebhookEvent
from bot.service.handlers.config_file import load_repo_config
from bot.service.handlers.context import JobContext, payload_of
from bot.service.handlers.router import Router
from bot.service.retention.erasure import erase_repositories

log = logging.getLogger(__name__)

PENDING = "pending"  # a repository waiting for its first page, in the sync table

router = Router()


SLICE = "/sync/"  # a continuation's delivery id: the installation's delivery id, SLICE, a progress count


@router.register("installation", "created")
@router.register("installation_repositories", "added")
def handle_installed(ctx: JobContext, event: WebhookEvent) -> str:
    """Sync the installation's pending repositories within one page budget for the whole job; what is left
    stays pending in the sync table and a continuation job (a short, bounded id) takes it up."""
    if ctx.client is None:
        return "no credentials to sync with"
    memory, settings = ctx.state.memory, ctx.state.settings
    assert event.installation_id is not None  # parse_event requires it of an installation delivery
    if SLICE not in ctx.delivery_id:  # the installation's own delivery: its repositories join the queue
        payload = payload_of(ctx)
        repos = repo_names(payload, "repositories" if event.event == "installation" else "repositories_added")
        if not repos:  # "all repositories" installations may list none in the payload
            repos = ctx.client.installation_repositories()
        queue_repositories(memory.store, repos, event.installation_id)
    budget = PageBudget(settings.memory_sync_pages_per_job)
    for cursor in pending_repositories(memory.store, event.installation_id):
        if budget.left <= 0:
            break
        if cursor.status == PENDING and not load_repo_config(ctx.client, cursor.repo, ctx.engine.taxonomy).enabled:
            log.info("history sync of %s skipped: its config turns the bot off", cursor.repo,
                     extra={"repo": cursor.repo})
            memory.store.delete_repo(cursor.repo)  # nothing of it is kept, not even its pending cursor
            continue
        try:
            cursor = sync_repository(ctx.client, memory.store, ctx.engine.embedder, cursor.repo,
                                     installation_id=event.installation_id, budget=budget,
                                     page_interval_s=settings.memory_page_interval_s,
                                     unless_erased_since=ctx.started_at)
        except ReadsExhausted as exc:  # the worker queues this job again for the reset, without an attempt
            raise RateLimited(str(exc), exc.wait_s) from None
        if cursor.status == "done":  # its label model is fitted here, not in the next triage job
            memory.labels.refit(cursor.repo)
    left = pending_repositories(memory.store, event.installation_id)
    if left:  # the rest is a new job, so triage jobs are not held up behind a long history
        queue_continuation(ctx, event, progress=sum(c.synced + c.page for c in memory.store.cursors()
                                                    if c.installation_id == event.installation_id))
        return f"history sync continues for {len(left)} repositories"
    return "history synced"


def queue_repositories(store: MemoryStore, repos: list[str], installation_id: int) -> None:
    """Each repository not synced yet becomes pending for this installation (one already running goes on)."""
    for repo in repos:
        cursor = store.cursor(repo)
        if cursor is None or cursor.status not in ("done", "running"):
            store.save_cursor(SyncCursor(repo=repo, installation_id=installation_id, status=PENDING,
                                         started_at=time.time()))


def pending_repositories(store: MemoryStore, installation_id: int) -> list[SyncCursor]:
    """The installation's repositories whose sync is unfinished (running first, then pending), by name."""
    mine = [c for c in store.cursors() if c.installation_id == installation_id and c.status in ("running", PENDING)]
    return sorted(mine, key=lambda c: (c.status != "running", c.repo))


def queue_continuation(ctx: JobContext, event: WebhookEvent, progress: int) -> None:
    """The next slice as a delivery of its own. Its id names the progress so far: a retried job that made no
    progress queues nothing twice; its payload names no repository (they wait in the sync table)."""
    root = ctx.delivery_id.split(SLICE)[0]
    payload = {key: value for key, value in payload_of(ctx).items() if key in ("action", "installation", "sender")}
    ctx.state.store.record_delivery(f"{root}{SLICE}{progress}", event.event, event.action, json.dumps(payload),
                                    event.issue_key)
    ctx.state.wake_worker.set()


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
    erased = erase_repositories(ctx.state.store, memory, ctx.engine.embedder, repos, ctx.delivery_id,
                                event.installation_id, whole_installation=deleted)
    log.info("%d uninstalled repositories erased", len(repos), extra=erased)
    return f"{len(repos)} repositories erased"


def repo_names(payload: dict[str, Any], key: str) -> list[str]:
    """The full names an installation payload lists under `key`."""
    return [str(r["full_name"]) for r in payload.get(key) or [] if isinstance(r, dict) and "full_name" in r]
