"""The TTL cache of neighbour titles: what GitHub says of the public pack cases a comment links to (title,
type, state), kept in the memory's `memory_titles` table so every worker and replica reads it once a day."""

from __future__ import annotations

import time

from pydantic import BaseModel

from bot.memory.store import MemoryStore


class CachedTitle(BaseModel):
    title: str | None
    type: str | None
    state: str | None
    fetched_at: float


def cached_title(store: MemoryStore, key: str, ttl_s: float) -> CachedTitle | None:
    """The cached title of `key` ("owner/repo#N"), or None when absent or older than `ttl_s`."""
    with store.transaction() as run:
        row = run("SELECT title, type, state, fetched_at FROM memory_titles WHERE key = ?", (key,)).fetchone()
    if row is None or row[3] < time.time() - ttl_s:
        return None
    return CachedTitle(title=row[0], type=row[1], state=row[2], fetched_at=row[3])


def cache_title(store: MemoryStore, key: str, title: str | None, type_: str | None, state: str | None) -> None:
    with store.transaction() as run:
        run("INSERT INTO memory_titles (key, title, type, state, fetched_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET title = excluded.title, type = excluded.type, "
            "state = excluded.state, fetched_at = excluded.fetched_at", (key, title, type_, state, time.time()))
