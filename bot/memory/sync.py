"""History sync: page through a repository's issues oldest first into the memory, resumable from a cursor,
within a page budget that a job shares across its repositories; near the rate limit it stops (the caller
resumes once the limit resets) rather than sleep."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.memory.models import ListedIssue
from bot.memory.records import memory_record
from bot.memory.store import MemoryStore, SyncCursor
from bot.models.embedding import Embedder

log = logging.getLogger(__name__)

PER_PAGE = 100
RESERVE = 100  # requests of the installation's hour that a history sync leaves for triage


class ReadsExhausted(Exception):
    """The installation's hourly requests are down to the reserve kept for triage: resume in `wait_s` seconds.
    The cursor is saved; nothing is lost by stopping here."""

    def __init__(self, repo: str, wait_s: float) -> None:
        super().__init__(f"history sync of {repo}: the rate limit's reserve is reached; resume in {wait_s:.0f}s")
        self.repo = repo
        self.wait_s = wait_s


@dataclass
class PageBudget:
    """Pages one job may still read, across every repository it syncs."""

    left: int

    def take(self) -> bool:
        """Spend one page; False when none is left."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True


class IssueReader(Protocol):
    """The reads a sync needs (the service's InstallationClient has them)."""

    def list_issues_page(self, repo: str, page: int, per_page: int = PER_PAGE, since: datetime | None = None
                         ) -> list[ListedIssue]: ...

    def closing_reference(self, repo: str, number: int) -> tuple[str | None, int | None]: ...

    def pace_reads(self, reserve: int = 100) -> float: ...


def sync_repository(client: IssueReader, store: MemoryStore, embedder: Embedder, repo: str, *,
                    installation_id: int | None = None, since: datetime | None = None, limit: int | None = None,
                    max_pages: int | None = None, budget: PageBudget | None = None, per_page: int = PER_PAGE,
                    page_interval_s: float = 0.0, restart: bool = False, wait_for_reset: bool = False,
                    reserve: int = RESERVE, unless_erased_since: float | None = None,
                    sleep: Callable[[float], None] = time.sleep) -> SyncCursor:
    """Sync `repo` from where its cursor stands (page 1 when new, finished, pending or `restart`).

    The cursor is saved after every page, so a crash or a restart resumes at the next page; issues are
    upserted by (repository, number), so pages read twice never duplicate anything. `limit` stops after
    that many issues, `max_pages` after that many pages and `budget` when the job's pages are spent (a slice
    of a background job): each leaves the cursor 'running' for the next call. Before every request (the page,
    and each closed issue's timeline) the installation's remaining requests are checked against `reserve`:
    at the reserve it raises `ReadsExhausted` (the caller reschedules), or with `wait_for_reset` sleeps until
    the reset (a CLI run). A page cut short keeps what it stored; read again, its issues stored at least as
    fresh as the listing says are skipped, so no timeline is read twice. Nothing is stored of a repository
    erased since `unless_erased_since` (the job's start: an uninstall ran meanwhile).
    """
    cursor = store.cursor(repo)
    if cursor is None or cursor.status != "running" or restart:
        cursor = SyncCursor(repo=repo, installation_id=installation_id, started_at=time.time(),
                            since=since.isoformat() if since else None)
    since_at = datetime.fromisoformat(cursor.since) if cursor.since else None
    budget = budget if budget is not None else PageBudget(max_pages if max_pages is not None else 1 << 62)
    done_now = 0
    store.save_cursor(cursor, unless_erased_since)
    while budget.left > 0:
        mind_the_rate_limit(client, repo, wait_for_reset, sleep, reserve)
        budget.take()
        page = client.list_issues_page(repo, cursor.page, per_page, since_at)
        items = page[: max(0, limit - done_now)] if limit is not None else page
        store_page(client, store, embedder, repo, items, lambda: mind_the_rate_limit(
            client, repo, wait_for_reset, sleep, reserve), unless_erased_since)
        done_now += len(items)
        if len(items) < len(page):  # stopped by the limit inside this page: read it again next time
            status, next_page = "running", cursor.page
        elif len(page) == per_page:
            status, next_page = "running", cursor.page + 1
        else:
            status, next_page = "done", cursor.page
        cursor = cursor.model_copy(update={"page": next_page, "synced": store.count(repo), "status": status})
        store.save_cursor(cursor, unless_erased_since)
        log.info("history sync of %s: %d issue(s) so far, next page %d", repo, cursor.synced, cursor.page,
                 extra={"repo": repo, "synced": cursor.synced, "page": cursor.page, "status": cursor.status})
        if cursor.status == "done" or (limit is not None and done_now >= limit):
            return cursor
        if page_interval_s > 0 and budget.left > 0:
            sleep(page_interval_s)
    return cursor


def store_page(client: IssueReader, store: MemoryStore, embedder: Embedder, repo: str,
               items: list[ListedIssue], before_request: Callable[[], None],
               unless_erased_since: float | None = None) -> None:
    """Store one page's issues, each closed one with what closed it (a timeline read, `before_request` first).
    Issues stored at least as fresh as the listing are skipped; when `before_request` raises, the issues read
    so far are stored first, so the page's next reading goes on from there."""
    fresh = store.fresh(repo, {d.number: d.updated_at for d in items})
    todo = [d for d in items if d.number not in fresh]
    records = []
    try:
        for data in todo:
            closed_by, duplicate_of = None, None
            if data.state == "closed" and not data.is_pull_request:
                before_request()
                closed_by, duplicate_of = client.closing_reference(repo, data.number)
            records.append(memory_record(repo, data, closed_by, duplicate_of))
    finally:
        if records:
            vectors = embedder.embed([text for _, text in records])
            written = store.upsert([(record, vector) for (record, _), vector in zip(records, vectors, strict=True)],
                                   unless_erased_since)
            embedder.forget(written.erased)  # erased while this page was read: their vectors go too


def mind_the_rate_limit(client: IssueReader, repo: str, wait_for_reset: bool,
                        sleep: Callable[[float], None], reserve: int = 100) -> None:
    """Before a request: past the reserve kept for triage, wait for the reset (a CLI) or raise for the caller."""
    reset_s = client.pace_reads(reserve)
    if reset_s <= 0:
        return
    if not wait_for_reset:
        raise ReadsExhausted(repo, reset_s)
    sleep(reset_s)

