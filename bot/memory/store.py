"""The memory's tables, in the service database (SQLite or PostgreSQL): issues per repository, sync cursors
and the TTL cache of neighbour titles. Only titles, labels, states and vectors are kept; never bodies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from bot.errors import ConfigError
from bot.redaction import redact
from bot.storage.database import connect_sqlite, live_postgres, transaction
from bot.storage.schema import create_tables

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_issues (
    repo TEXT NOT NULL, number INTEGER NOT NULL, type TEXT NOT NULL, title TEXT NOT NULL, state TEXT NOT NULL,
    state_reason TEXT, labels TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, closed_at DOUBLE PRECISION,
    closed_by TEXT, duplicate_of INTEGER, text_hash TEXT NOT NULL, vector {blob} NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (repo, number));
CREATE TABLE IF NOT EXISTS memory_sync (
    repo TEXT PRIMARY KEY, installation_id BIGINT, page INTEGER NOT NULL, synced INTEGER NOT NULL,
    status TEXT NOT NULL, since TEXT, error TEXT, started_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS memory_versions (
    repo TEXT PRIMARY KEY, version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_titles (
    key TEXT PRIMARY KEY, title TEXT, type TEXT, state TEXT, fetched_at DOUBLE PRECISION NOT NULL);
"""
COLUMNS = ("repo, number, type, title, state, state_reason, labels, created_at, closed_at, closed_by, "
           "duplicate_of, text_hash, vector, updated_at")


class MemoryIssue(BaseModel):
    """One issue or pull request of a repository as the memory keeps it."""

    repo: str
    number: int
    type: str = "issue"  # "issue" | "pull_request"
    title: str
    state: str = "open"
    state_reason: str | None = None  # completed | not_planned | duplicate | reopened
    labels: list[str] = Field(default_factory=list)
    created_at: float
    closed_at: float | None = None
    closed_by: str | None = None  # "#4290" (a pull request) or a commit sha
    duplicate_of: int | None = None
    text_hash: str


class SyncCursor(BaseModel):
    """Where a repository's history sync stands: the next page to read (oldest first) and the count so far."""

    repo: str
    installation_id: int | None = None
    page: int = 1
    synced: int = 0
    status: str = "running"  # running | done | failed
    since: str | None = None
    error: str | None = None
    started_at: float = 0.0
    updated_at: float = 0.0


class CachedTitle(BaseModel):
    title: str | None
    type: str | None
    state: str | None
    fetched_at: float


class MemoryStore:
    """Its own connection to the service database; every method is one transaction."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        self._lock = threading.Lock()
        self._conn: Any = _connect(url, self.postgres)
        with self._tx() as run:
            create_tables(run, self.postgres, SCHEMA.format(blob="BYTEA" if self.postgres else "BLOB"))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def pragma(self, statement: str) -> list[tuple[Any, ...]]:
        """`PRAGMA statement` on this store's own connection (SQLite only; most PRAGMAs are per connection)."""
        if self.postgres:
            raise ConfigError("PRAGMA is an SQLite statement; this store is on PostgreSQL")
        with self._lock:
            return list(self._conn.execute(f"PRAGMA {statement}").fetchall())

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._lock:
            if self.postgres:  # the server restarted: a new connection, or StoreUnavailable while it is down
                self._conn = live_postgres(self._conn, lambda: _connect(self.url, True))
            with transaction(self._conn, self.postgres) as run:
                yield run

    # --- issues -------------------------------------------------------------------------------------------

    def upsert(self, items: Sequence[tuple[MemoryIssue, np.ndarray]]) -> None:
        """Insert or replace issues (keyed by repository and number): a repeated sync never duplicates."""
        now = time.time()
        rows = [(i.repo, i.number, i.type, i.title, i.state, i.state_reason, json.dumps(i.labels), i.created_at,
                 i.closed_at, i.closed_by, i.duplicate_of, i.text_hash, _blob(v), now) for i, v in items]
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS.split(", ")[2:])
        with self._tx() as run:
            for row in rows:
                run(f"INSERT INTO memory_issues ({COLUMNS}) VALUES ({', '.join('?' * 14)}) "
                    f"ON CONFLICT (repo, number) DO UPDATE SET {updates}", row)
            for repo in {i.repo for i, _ in items}:
                _bump(run, repo)

    def update_fields(self, repo: str, number: int, **fields: Any) -> bool:
        """Change some fields of a stored issue (labels, state...); False when the issue is not stored."""
        if "labels" in fields:
            fields["labels"] = json.dumps(fields["labels"])
        sets = ", ".join(f"{name} = ?" for name in fields)
        with self._tx() as run:
            changed = bool(run(f"UPDATE memory_issues SET {sets}, updated_at = ? WHERE repo = ? AND number = ?",
                               (*fields.values(), time.time(), repo, number)).rowcount)
            _bump(run, repo)
            return changed

    def delete_issue(self, repo: str, number: int) -> None:
        with self._tx() as run:
            run("DELETE FROM memory_issues WHERE repo = ? AND number = ?", (repo, number))
            _bump(run, repo)

    def delete_repo(self, repo: str) -> list[str]:
        """Forget a repository entirely (uninstalled): its issues and their vectors, its sync cursor, its
        version and the cached titles of its issues; returns the text hashes of the issues it held."""
        with self._tx() as run:
            hashes = [str(row[0]) for row in run("SELECT text_hash FROM memory_issues WHERE repo = ?",
                                                 (repo,)).fetchall()]
            run("DELETE FROM memory_issues WHERE repo = ?", (repo,))
            run("DELETE FROM memory_sync WHERE repo = ?", (repo,))
            run("DELETE FROM memory_versions WHERE repo = ?", (repo,))
            run("DELETE FROM memory_titles WHERE key LIKE ?", (f"{repo}#%",))
        return hashes

    def issue(self, repo: str, number: int) -> MemoryIssue | None:
        with self._tx() as run:
            row = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? AND number = ?",
                      (repo, number)).fetchone()
        return _issue(row) if row else None

    def issues(self, repo: str) -> list[MemoryIssue]:
        """Every stored issue of the repository, oldest first."""
        with self._tx() as run:
            rows = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? ORDER BY created_at, number",
                       (repo,)).fetchall()
        return [_issue(row) for row in rows]

    def vectors(self, repo: str) -> tuple[list[MemoryIssue], np.ndarray]:
        """The repository's issues and their vectors (one row each), for the backtest."""
        with self._tx() as run:
            rows = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? ORDER BY number", (repo,)).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [_issue(r) for r in rows], np.vstack([np.frombuffer(bytes(r[12]), dtype=np.float32) for r in rows])

    def search_rows(self, repo: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(numbers, created times, vectors) of a repository: what the in-memory index holds, nothing more."""
        with self._tx() as run:
            rows = run("SELECT number, created_at, vector FROM memory_issues WHERE repo = ? ORDER BY number",
                       (repo,)).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, 0), dtype=np.float32)
        vectors = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.float32).reshape(len(rows), -1)
        return (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.float64),
                vectors)

    def issues_by_number(self, repo: str, numbers: Sequence[int]) -> dict[int, MemoryIssue]:
        if not numbers:
            return {}
        with self._tx() as run:
            rows = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? AND number IN "
                       f"({', '.join('?' * len(numbers))})", (repo, *numbers)).fetchall()
        return {int(r[1]): _issue(r) for r in rows}

    def version(self, repo: str) -> int:
        """A number that changes with every write to the repository's memory (by any replica)."""
        with self._tx() as run:
            row = run("SELECT version FROM memory_versions WHERE repo = ?", (repo,)).fetchone()
        return int(row[0]) if row else 0

    def count(self, repo: str) -> int:
        with self._tx() as run:
            return int(run("SELECT COUNT(*) FROM memory_issues WHERE repo = ?", (repo,)).fetchone()[0])

    def repos(self) -> list[str]:
        with self._tx() as run:
            rows = run("SELECT DISTINCT repo FROM memory_issues ORDER BY repo").fetchall()
        return [str(r[0]) for r in rows]

    # --- sync cursors -------------------------------------------------------------------------------------

    def cursor(self, repo: str) -> SyncCursor | None:
        with self._tx() as run:
            row = run("SELECT repo, installation_id, page, synced, status, since, error, started_at, updated_at "
                      "FROM memory_sync WHERE repo = ?", (repo,)).fetchone()
        keys = ("repo", "installation_id", "page", "synced", "status", "since", "error", "started_at",
                "updated_at")
        return SyncCursor.model_validate(dict(zip(keys, row, strict=True))) if row else None

    def save_cursor(self, cursor: SyncCursor) -> None:
        c = cursor.model_copy(update={"updated_at": time.time()})
        with self._tx() as run:
            run("INSERT INTO memory_sync (repo, installation_id, page, synced, status, since, error, started_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (repo) DO UPDATE SET "
                "installation_id = excluded.installation_id, page = excluded.page, synced = excluded.synced, "
                "status = excluded.status, since = excluded.since, error = excluded.error, "
                "started_at = excluded.started_at, updated_at = excluded.updated_at",
                (c.repo, c.installation_id, c.page, c.synced, c.status, c.since, c.error, c.started_at,
                 c.updated_at))

    def cursors(self) -> list[SyncCursor]:
        with self._tx() as run:
            repos = [str(r[0]) for r in run("SELECT repo FROM memory_sync ORDER BY repo").fetchall()]
        return [c for repo in repos if (c := self.cursor(repo)) is not None]

    # --- neighbour titles (a TTL cache of what GitHub says about public pack cases) ------------------------

    def cached_title(self, key: str, ttl_s: float) -> CachedTitle | None:
        with self._tx() as run:
            row = run("SELECT title, type, state, fetched_at FROM memory_titles WHERE key = ?", (key,)).fetchone()
        if row is None or row[3] < time.time() - ttl_s:
            return None
        return CachedTitle(title=row[0], type=row[1], state=row[2], fetched_at=row[3])

    def cache_title(self, key: str, title: str | None, type_: str | None, state: str | None) -> None:
        with self._tx() as run:
            run("INSERT INTO memory_titles (key, title, type, state, fetched_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET title = excluded.title, type = excluded.type, "
                "state = excluded.state, fetched_at = excluded.fetched_at", (key, title, type_, state, time.time()))


def _bump(run: Any, repo: str) -> None:
    # A new version is at least the clock in nanoseconds: a repository forgotten (its row deleted) and
    # synced again never gets back a version that a replica's index still holds for its old rows.
    run("INSERT INTO memory_versions (repo, version) VALUES (?, ?) ON CONFLICT (repo) DO UPDATE SET version = "
        "CASE WHEN excluded.version > memory_versions.version THEN excluded.version "
        "ELSE memory_versions.version + 1 END", (repo, time.time_ns()))


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def _issue(row: Sequence[Any]) -> MemoryIssue:
    return MemoryIssue(repo=row[0], number=row[1], type=row[2], title=row[3], state=row[4], state_reason=row[5],
                       labels=json.loads(row[6]), created_at=row[7], closed_at=row[8], closed_by=row[9],
                       duplicate_of=row[10], text_hash=row[11])


def _connect(url: str, postgres: bool) -> Any:
    if postgres:
        import psycopg

        try:
            return psycopg.connect(url)
        except psycopg.OperationalError as exc:
            reason = " ".join(redact(str(exc)).split())  # one line, never the URL's password
            raise ConfigError(f"DDL_TRIAGE_DATABASE_URL: cannot connect to PostgreSQL: {reason}") from None
    return connect_sqlite(url, busy_timeout_s=30.0)
