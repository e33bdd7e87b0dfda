"""The erasure log: one row per erased repository (or issue), written BEFORE its rows are deleted. It names
nothing (a keyed digest of the repository's name), and serves two readers:

- a write that a job started before the erasure would make (a triage running during an uninstall, a sync
  slice) is refused: `erased_since`, checked in the write's own transaction;
- every process's learned corrections drop the erased issues from their case base (`erasures_after`).

Rows are kept for the retention period, then pruned (`bot/service/retention/`)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS erasures (
    id {serial} PRIMARY KEY, repo_key TEXT NOT NULL, number INTEGER, erased_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS erasures_by_repo ON erasures (repo_key, erased_at);
"""


def repo_key(repo: str) -> str:
    """The log's name for a repository: a digest, so the log holds no repository's name."""
    return hashlib.sha256(f"ddl-triage erasure {repo.casefold()}".encode()).hexdigest()[:32]


def record_erasure(run: Any, repo: str, number: int | None = None, now: float | None = None) -> None:
    """Log that `repo` (or its issue `number`) is being erased; inside the caller's transaction."""
    run("INSERT INTO erasures (repo_key, number, erased_at) VALUES (?, ?, ?)",
        (repo_key(repo), number, time.time() if now is None else now))


def erased_since(run: Any, repo: str, number: int | None, since: float | None) -> bool:
    """Whether `repo` (or its issue `number`) was erased at or after `since` (None: never refused)."""
    if since is None:
        return False
    row = run("SELECT 1 FROM erasures WHERE repo_key = ? AND erased_at >= ? AND (number IS NULL OR number = ?) "
              "LIMIT 1", (repo_key(repo), since, number if number is not None else -1)).fetchone()
    return row is not None


def erasures_after(run: Any, last_id: int) -> list[tuple[int, str, int | None]]:
    """(id, repository key, issue number or None) of the erasures logged after `last_id`, oldest first."""
    rows = run("SELECT id, repo_key, number FROM erasures WHERE id > ? ORDER BY id", (last_id,)).fetchall()
    return [(int(i), str(key), None if n is None else int(n)) for i, key, n in rows]


def create_erasure_table(run: Any, postgres: bool) -> None:
    """The log's table (the service's store and the memory's both create it: either may open the database first)."""
    from bot.core.storage.schema import create_tables

    create_tables(run, postgres, SCHEMA.format(serial="BIGSERIAL" if postgres else "INTEGER"))
