"""The memory's tables, in the service database (SQLite or PostgreSQL): issues per repository, their error
signatures, sync cursors and the TTL cache of neighbour titles. Only titles, labels, states, vectors and the
canonical error signatures (placeholders for the author's values) are kept; never bodies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from bot.core.domain import ErrorSignature
from bot.core.errors import ConfigError
from bot.core.storage.database import connect_postgres, connect_sqlite, live_postgres, transaction
from bot.core.storage.erasures import erased_since
from bot.memory.models import MemoryIssue, SyncCursor
from bot.memory.signature_rows import replace_signatures, sharing_numbers, stored_signatures
from bot.memory.tables import create_memory_tables, delete_issue_rows

Rows = tuple[np.ndarray, np.ndarray, np.ndarray]  # numbers, creation times, vectors (one row per issue)
CURSOR_COLUMNS = "repo, installation_id, page, synced, status, since, error, started_at, updated_at"
# The stored row is replaced unless GitHub says it is fresher than the item (either time unknown: replaced).
FRESH = ("memory_issues.source_updated_at IS NULL OR excluded.source_updated_at IS NULL "
         "OR excluded.source_updated_at >= memory_issues.source_updated_at")
COLUMNS = ("repo, number, type, title, state, state_reason, labels, created_at, closed_at, closed_by, "
           "duplicate_of, text_hash, vector, updated_at, source_updated_at, written_version")


@dataclass(frozen=True)
class Written:
    """What an upsert did: each repository's version (before, after), the items it left out as stale, and the
    text hashes of those left out because their repository or issue was erased (their vectors are to be forgotten:
    the writer embedded them before it knew)."""

    versions: dict[str, tuple[int, int]]
    stale: set[tuple[str, int]]
    erased: tuple[str, ...] = ()


class MemoryStore:
    """Its own connection to the service database; every method is one transaction."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        self._lock = threading.Lock()
        self._conn: Any = _connect(url, self.postgres)
        with self._tx() as run:
            create_memory_tables(run, self.postgres)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def pragma(self, statement: str) -> list[tuple[Any, ...]]:
        """`PRAGMA statement` on this store's own connection (SQLite only; most PRAGMAs are per connection)."""
        if self.postgres:
            raise ConfigError("PRAGMA is an SQLite statement; this store is on PostgreSQL")
        with self._lock:
            return list(self._conn.execute(f"PRAGMA {statement}").fetchall())

    def transaction(self) -> Any:
        """One transaction (a `run(sql, params)` callable), for the memory's sibling modules."""
        return self._tx()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._lock:
            if self.postgres:  # the server restarted: a new connection, or StoreUnavailable while it is down
                self._conn = live_postgres(self._conn, lambda: _connect(self.url, True))
            with transaction(self._conn, self.postgres) as run:
                yield run

    # --- issues -------------------------------------------------------------------------------------------

    def upsert(self, items: Sequence[tuple[MemoryIssue, np.ndarray]], unless_erased_since: float | None = None
               ) -> Written:
        """Insert or replace issues (keyed by repository and number) with their signatures: a repeated sync never
        duplicates, and an edited issue keeps only the signatures its text shows now. An item older on GitHub
        (`source_updated_at`) than the stored issue is left out: a delivery retried late never undoes a fresher
        one; so is one erased since `unless_erased_since` (the writing job's start: an uninstall ran meanwhile).
        Returns each repository's version (before, after) the write, and the items left out as stale."""
        now = time.time()
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS.split(", ")[2:])
        stale: set[tuple[str, int]] = set()
        erased: list[str] = []
        with self._tx() as run:
            versions = {repo: _bump(run, repo, self.postgres) for repo in sorted({i.repo for i, _ in items})}
            for i, v in items:
                if erased_since(run, i.repo, i.number, unless_erased_since):
                    stale.add((i.repo, i.number))
                    erased.append(i.text_hash)
                    continue
                row = (i.repo, i.number, i.type, i.title, i.state, i.state_reason, json.dumps(i.labels),
                       i.created_at, i.closed_at, i.closed_by, i.duplicate_of, i.text_hash, _blob(v), now,
                       i.source_updated_at, versions[i.repo][1])
                if run(f"INSERT INTO memory_issues ({COLUMNS}) VALUES ({', '.join('?' * len(row))}) "
                       f"ON CONFLICT (repo, number) DO UPDATE SET {updates} WHERE {FRESH} RETURNING number",
                       row).fetchone() is None:
                    stale.add((i.repo, i.number))  # older than what is stored; its text was embedded all the same
                else:
                    replace_signatures(run, i.repo, i.number, i.signatures)
                run("INSERT INTO memory_text_hashes (repo, number, text_hash) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    (i.repo, i.number, i.text_hash))
        return Written(versions, stale, tuple(erased))

    def fresh(self, repo: str, updated: dict[int, float | None]) -> set[int]:
        """Those of `updated` (number: GitHub's `updated_at`) stored at least as fresh: nothing to read again."""
        known = [n for n, at in updated.items() if at is not None]
        if not known:
            return set()
        with self._tx() as run:
            rows = run(f"SELECT number, source_updated_at FROM memory_issues WHERE repo = ? AND number IN "
                       f"({', '.join('?' * len(known))})", (repo, *known)).fetchall()
        return {int(n) for n, at in rows if at is not None and float(at) >= float(updated[int(n)] or 0.0)}

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

    def delete_issue(self, repo: str, number: int) -> list[str]:
        """Forget one issue; the hashes of every text the memory stored for it (for the embedding cache)."""
        with self._tx() as run:
            hashes = delete_issue_rows(run, repo, [number])
            run("UPDATE memory_versions SET erased_version = ? WHERE repo = ?", (_bump(run, repo)[1], repo))
        return sorted(hashes)

    def delete_repo(self, repo: str) -> list[str]:
        """Forget a repository entirely, in small transactions (`forget.py`); the hashes of every text its
        issues had in the memory."""
        from bot.memory.forget import delete_repo

        return delete_repo(self, repo)

    def issue(self, repo: str, number: int) -> MemoryIssue | None:
        with self._tx() as run:
            row = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? AND number = ?",
                      (repo, number)).fetchone()
            signatures = stored_signatures(run, repo, [number]) if row else {}
        return _issue(row, signatures) if row else None

    def issues(self, repo: str) -> list[MemoryIssue]:
        """Every stored issue of the repository, oldest first."""
        with self._tx() as run:
            rows = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? ORDER BY created_at, number",
                       (repo,)).fetchall()
            signatures = stored_signatures(run, repo)
        return [_issue(row, signatures) for row in rows]

    def vectors(self, repo: str) -> tuple[list[MemoryIssue], np.ndarray]:
        """The repository's issues and their vectors (one row each), for the backtest."""
        with self._tx() as run:
            rows = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? ORDER BY number", (repo,)).fetchall()
            signatures = stored_signatures(run, repo)
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        vectors = np.vstack([np.frombuffer(bytes(r[12]), dtype=np.float32) for r in rows])
        return [_issue(r, signatures) for r in rows], vectors

    def search_rows(self, repo: str) -> Rows:
        """(numbers, created times, vectors) of a repository: what the in-memory index holds, nothing more."""
        with self._tx() as run:
            return _rows(run("SELECT number, created_at, vector FROM memory_issues WHERE repo = ? ORDER BY number",
                             (repo,)).fetchall())

    def changes_since(self, repo: str, version: int) -> tuple[int, Rows] | None:
        """The repository's version now and the rows written after `version` (as `search_rows`); None when an
        issue was deleted since, or the repository forgotten: then only a full read is right."""
        with self._tx() as run:
            now = run("SELECT version, erased_version FROM memory_versions WHERE repo = ?", (repo,)).fetchone()
            if now is None or int(now[1] or 0) > version:
                return None
            return int(now[0]), _rows(run("SELECT number, created_at, vector FROM memory_issues WHERE repo = ? "
                                          "AND written_version > ? ORDER BY number", (repo, version)).fetchall())

    def issues_by_number(self, repo: str, numbers: Sequence[int]) -> dict[int, MemoryIssue]:
        if not numbers:
            return {}
        with self._tx() as run:
            rows = run(f"SELECT {COLUMNS} FROM memory_issues WHERE repo = ? AND number IN "
                       f"({', '.join('?' * len(numbers))})", (repo, *numbers)).fetchall()
            signatures = stored_signatures(run, repo, numbers)
        return {int(r[1]): _issue(r, signatures) for r in rows}

    def sharing(self, repo: str, digests: Sequence[str], exclude: int | None = None,
                before: float | None = None) -> list[int]:
        """The issues of `repo` (and of no other repository) that show an error signature of these digests."""
        with self._tx() as run:
            return sharing_numbers(run, repo, digests, exclude, before)

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
            row = run(f"SELECT {CURSOR_COLUMNS} FROM memory_sync WHERE repo = ?", (repo,)).fetchone()
        return _cursor(row) if row else None

    def save_cursor(self, cursor: SyncCursor, unless_erased_since: float | None = None) -> None:
        """Store the cursor (not for a repository erased since `unless_erased_since`: it would name it again)."""
        c = cursor.model_copy(update={"updated_at": time.time()})
        with self._tx() as run:
            if erased_since(run, c.repo, None, unless_erased_since):
                return
            run(f"INSERT INTO memory_sync ({CURSOR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (repo) "
                "DO UPDATE SET " + ", ".join(f"{k} = excluded.{k}" for k in CURSOR_COLUMNS.split(", ")[1:]),
                tuple(getattr(c, k) for k in CURSOR_COLUMNS.split(", ")))

    def cursors(self) -> list[SyncCursor]:
        """Every repository's cursor, by name, in one query (the open /healthz reads them)."""
        with self._tx() as run:
            rows = run(f"SELECT {CURSOR_COLUMNS} FROM memory_sync ORDER BY repo").fetchall()
        return [_cursor(row) for row in rows]

def _bump(run: Any, repo: str, postgres: bool = False) -> tuple[int, int]:
    """The repository's version (before, after) this write; the row is locked first on PostgreSQL (SQLite's
    write lock is taken at BEGIN), so `before` is the version this write follows."""
    # A new version is at least the clock in nanoseconds: a repository forgotten (its row deleted) and
    # synced again never gets back a version that a replica's index still holds for its old rows.
    row = run("SELECT version FROM memory_versions WHERE repo = ?" + (" FOR UPDATE" if postgres else ""),
              (repo,)).fetchone()
    after = run("INSERT INTO memory_versions (repo, version) VALUES (?, ?) ON CONFLICT (repo) DO UPDATE SET "
                "version = CASE WHEN excluded.version > memory_versions.version THEN excluded.version "
                "ELSE memory_versions.version + 1 END RETURNING version", (repo, time.time_ns())).fetchone()
    return (int(row[0]) if row else 0), int(after[0])


def _cursor(row: Sequence[Any]) -> SyncCursor:
    return SyncCursor.model_validate(dict(zip(CURSOR_COLUMNS.split(", "), row, strict=True)))


def _rows(rows: Sequence[Any]) -> Rows:
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, 0), dtype=np.float32)
    vectors = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.float64), vectors


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def _issue(row: Sequence[Any], signatures: dict[int, tuple[ErrorSignature, ...]] | None = None) -> MemoryIssue:
    return MemoryIssue(repo=row[0], number=row[1], type=row[2], title=row[3], state=row[4], state_reason=row[5],
                       labels=json.loads(row[6]), created_at=row[7], closed_at=row[8], closed_by=row[9],
                       duplicate_of=row[10], text_hash=row[11], signatures=(signatures or {}).get(int(row[1]), ()),
                       source_updated_at=row[14])


def _connect(url: str, postgres: bool) -> Any:
    """A statement (a lock wait included) is bounded at 30 s on either database, as the queue's are."""
    return connect_postgres(url, 30.0) if postgres else connect_sqlite(url, busy_timeout_s=30.0)
