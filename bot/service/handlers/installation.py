"""Installation events: an installed repository's history is synced into the memory (unless its config
turns the bot off); everything of an uninstalled one is erased, without asking GitHub anything."""

from __future__ import annotations

import json
import logging
import time

from bot.core.storage.fairness import give_way
from bot.deciding.repo_config import RepoConfigError
from bot.memory.store import MemoryStore, SyncCursor
from bot.memory.sync import PageBudget, ReadsExhausted, sync_repository
from bot.service.errors import PermanentGitHubError, RateLimited, RetryLater, TransientGitHubError
from bot.service.github.models import WebhookEvent
from bot.service.github.payloads import added_repositories, removed_repositories, reparse_fields
from bot.service.handlers.config_file import checked_config
from bot.service.handlers.context import JobContext, payload_of
from bot.service.handlers.router import Router
from bot.service.retention.erasure import erase_repositories

log = logging.getLogger(__name__)

PENDING = "pending"  # a repository waiting for its first page, in the sync table
FAILED = "failed"  # a repository whose sync failed; tried again after a backoff
RETRY_FIRST_S = 600.0  # a failed repository's first retry: ten minutes; then as long again as it has failed
RETRY_MAX_S = 86400.0  # ... at most a day apart

router = Router()


SLICE = "/sync/"  # a continuation's delivery id: the installation's delivery id, SLICE, a progress count


@router.register("installation", "created")
@router.register("installation_repositories", "added")
def handle_installed(ctx: JobContext, event: WebhookEvent) -> str:
    """Sync the installation's pending repositories within one page budget for the whole job; what is left
    stays pending in the sync table and a continuation job (a short, bounded id) takes it up.

    A repository that fails (its issues disabled: 410; 403, 404, a 5xx; a config that cannot be read or does
    not validate) does not stop the others: its cursor is marked failed with the reason, and it is tried again
    after a backoff (`retry_at`), after every other repository. While only such retries are left, this job is
    queued again for the earliest of them (`RetryLater`)."""
    if ctx.client is None:
        return "no credentials to sync with"
    memory, settings = ctx.state.memory, ctx.state.settings
    assert event.installation_id is not None  # parse_event requires it of an installation delivery
    if SLICE not in ctx.delivery_id:  # the installation's own delivery: its repositories join the queue
        payload = payload_of(ctx)
        repos = added_repositories(event.event, payload)
        if not repos:  # "all repositories" installations may list none in the payload
            repos = ctx.client.installation_repositories()
        queue_repositories(memory.store, repos, event.installation_id)
    budget = PageBudget(settings.memory_sync_pages_per_job)
    for cursor in pending_repositories(memory.store, event.installation_id):
        if budget.left <= 0:
            break
        try:
            if cursor.status in (PENDING, FAILED) and not checked_config(ctx, cursor.repo).enabled:
                log.info("history sync of %s skipped: its config turns the bot off", cursor.repo,
                         extra={"repo": cursor.repo})
                # Nothing of it is kept, not even its pending cursor, nor the vectors of what it held.
                ctx.engine.embedder.forget(memory.forget_repo(cursor.repo))
                continue
            if cursor.status == FAILED:  # resumed at its page, not from the start
                memory.store.save_cursor(cursor.model_copy(update={"status": "running", "error": None}))
            synced = sync_repository(ctx.client, memory.store, ctx.engine.embedder, cursor.repo,
                                     installation_id=event.installation_id, budget=budget,
                                     page_interval_s=settings.memory_page_interval_s,
                                     unless_erased_since=ctx.started_at)
        except ReadsExhausted as exc:  # the worker queues this job again for the reset, without an attempt
            raise RateLimited(str(exc), exc.wait_s) from None
        except (RepoConfigError, TransientGitHubError, PermanentGitHubError) as exc:
            if isinstance(exc, PermanentGitHubError) and exc.status == 401:  # the token: the job retries
                raise
            mark_failed(memory.store, cursor, exc)
            continue
        if synced.status == "done":  # its label model is fitted here, not in the next triage job
            memory.labels.refit(synced.repo)
    left = pending_repositories(memory.store, event.installation_id)
    if left:  # the rest is a new job, so triage jobs are not held up behind a long history
        queue_continuation(ctx, event, progress=sum(c.synced + c.page for c in memory.store.cursors()
                                                    if c.installation_id == event.installation_id))
        return f"history sync continues for {len(left)} repositories"
    waiting = [c for c in memory.store.cursors() if c.installation_id == event.installation_id
               and c.status == FAILED]
    if waiting:
        first = min(waiting, key=retry_at)
        raise RetryLater(f"history sync: {len(waiting)} repositories failed ({first.repo}: {first.error}); the "
                         f"next is tried again in {retry_at(first) - time.time():.0f} s",
                         max(1.0, retry_at(first) - time.time()))
    return "history synced"


def queue_repositories(store: MemoryStore, repos: list[str], installation_id: int) -> None:
    """Each repository not synced yet becomes pending for this installation (one already running goes on; one
    that failed keeps its backoff)."""
    for repo in repos:  # an installation on "all repositories" can bring thousands: the intake goes first
        give_way(store.url)
        cursor = store.cursor(repo)
        if cursor is None or cursor.status not in ("done", "running", FAILED):
            store.save_cursor(SyncCursor(repo=repo, installation_id=installation_id, status=PENDING,
                                         started_at=time.time()))


def pending_repositories(store: MemoryStore, installation_id: int, now: float | None = None) -> list[SyncCursor]:
    """The installation's repositories whose sync is unfinished, in the order they are taken: running, then
    pending (by name), then the failed ones whose backoff is over (the longest waiting first). A failed one is
    never first while another can go."""
    now = time.time() if now is None else now
    mine = [c for c in store.cursors() if c.installation_id == installation_id
            and (c.status in ("running", PENDING) or (c.status == FAILED and retry_at(c) <= now))]
    return sorted(mine, key=lambda c: (c.status == FAILED, c.status != "running",
                                       retry_at(c) if c.status == FAILED else 0.0, c.repo))


def mark_failed(store: MemoryStore, cursor: SyncCursor, exc: Exception) -> None:
    """The repository's sync failed: its cursor says why and keeps its page; `started_at` becomes the time it
    first failed, so that each retry waits as long again as it has failed so far (`retry_at`)."""
    since = cursor.started_at if cursor.status == FAILED else time.time()
    reason = str(exc) if isinstance(exc, RepoConfigError) else f"{type(exc).__name__}: {exc}"
    current = store.cursor(cursor.repo) or cursor
    failed = current.model_copy(update={"status": FAILED, "error": reason[:500], "started_at": since})
    store.save_cursor(failed)
    log.warning("history sync of %s failed: %s; the other repositories go on, it is tried again in %.0f s",
                cursor.repo, reason, retry_at(failed.model_copy(update={"updated_at": time.time()})) - time.time(),
                extra={"repo": cursor.repo})


def retry_at(cursor: SyncCursor) -> float:
    """When a failed repository is tried again: after as long as it has been failing (doubling), at least
    RETRY_FIRST_S, at most RETRY_MAX_S after its last failure (`updated_at`)."""
    failing_s = max(0.0, cursor.updated_at - cursor.started_at)
    return cursor.updated_at + min(RETRY_MAX_S, max(RETRY_FIRST_S, failing_s))


def queue_continuation(ctx: JobContext, event: WebhookEvent, progress: int) -> None:
    """The next slice as a delivery of its own. Its id names the progress so far: a retried job that made no
    progress queues nothing twice; its payload names no repository (they wait in the sync table)."""
    root = ctx.delivery_id.split(SLICE)[0]
    payload = reparse_fields(payload_of(ctx))
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
    repos = set(removed_repositories(event.event, payload))
    memory = ctx.state.memory
    if deleted:  # every repository this installation synced, whether or not the payload lists it
        repos |= {c.repo for c in memory.store.cursors() if c.installation_id == event.installation_id}
    erased = erase_repositories(ctx.state.store, memory, ctx.engine.embedder, repos, ctx.delivery_id,
                                event.installation_id, whole_installation=deleted)
    log.info("%d uninstalled repositories erased", len(repos), extra=erased)
    return f"{len(repos)} repositories erased"
