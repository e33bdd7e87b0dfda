"""History sync: page through a repository's issues oldest first into the memory, resumable from a cursor."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from bot.embedding import Embedder
from bot.memory.records import embed_records, memory_issue
from bot.memory.store import MemoryStore, SyncCursor

log = logging.getLogger(__name__)

PER_PAGE = 100


class IssueReader(Protocol):
    """The reads a sync needs (the service's InstallationClient has them)."""

    def list_issues_page(self, repo: str, page: int, per_page: int = PER_PAGE, since: datetime | None = None
                         ) -> list[dict[str, object]]: ...

    def closing_reference(self, repo: str, number: int) -> tuple[str | None, int | None]: ...

    def pace_reads(self, reserve: int = 100) -> float: ...


def sync_repository(client: IssueReader, store: MemoryStore, embedder: Embedder, repo: str, *,
                    installation_id: int | None = None, since: datetime | None = None, limit: int | None = None,
                    max_pages: int | None = None, per_page: int = PER_PAGE, page_interval_s: float = 0.0,
                    restart: bool = False, sleep: Callable[[float], None] = time.sleep) -> SyncCursor:
    """Sync `repo` from where its cursor stands (page 1 when new, finished or `restart`).

    The cursor is saved after every page, so a crash or a restart resumes at the next page; issues are
    upserted by (repository, number), so pages read twice never duplicate anything. `limit` stops after
    that many issues and `max_pages` after that many pages (a slice of a background job): both leave the
    cursor 'running' for the next call.
    """
    cursor = store.cursor(repo)
    if cursor is None or cursor.status != "running" or restart:
        cursor = SyncCursor(repo=repo, installation_id=installation_id, started_at=time.time(),
                            since=since.isoformat() if since else None)
    since_at = datetime.fromisoformat(cursor.since) if cursor.since else None
    pages = done_now = 0
    store.save_cursor(cursor)
    while True:
        page = client.list_issues_page(repo, cursor.page, per_page, since_at)
        items = page[: max(0, limit - done_now)] if limit is not None else page
        if items:
            records = []
            for data in items:
                closed_by, duplicate_of = (client.closing_reference(repo, int(str(data["number"])))
                                           if data.get("state") == "closed" and not data.get("pull_request")
                                           else (None, None))
                records.append(memory_issue(repo, data, closed_by, duplicate_of))
            store.upsert(list(zip(records, embed_records(embedder, items), strict=True)))
        done_now += len(items)
        pages += 1
        if len(items) < len(page):  # stopped by the limit inside this page: read it again next time
            status, next_page = "running", cursor.page
        elif len(page) == per_page:
            status, next_page = "running", cursor.page + 1
        else:
            status, next_page = "done", cursor.page
        cursor = cursor.model_copy(update={"page": next_page, "synced": store.count(repo), "status": status})
        store.save_cursor(cursor)
        log.info("history sync of %s: %d issue(s) so far, next page %d", repo, cursor.synced, cursor.page,
                 extra={"repo": repo, "synced": cursor.synced, "page": cursor.page, "status": cursor.status})
        if cursor.status == "done" or (limit is not None and done_now >= limit) or \
                (max_pages is not None and pages >= max_pages):
            return cursor
        wait = max(page_interval_s, client.pace_reads())
        if wait > 0:
            sleep(wait)
