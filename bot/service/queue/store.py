"""The service database, on SQLite or PostgreSQL: the queue's deliveries (unique by id) and jobs here; the tables and
queries of decisions and corrections (`bot/service/decisions/`), GitHub write pacing (`bot/service/github/pacing.py`)
and the review page's (`bot/service/review/tables.py`) created with them."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from bot.core.errors import ConfigError
from bot.core.storage.database import (  # StoreUnavailable and the connectors are imported from here too
    StoreUnavailable,
    check_room,
    connect_postgres,
    connect_sqlite,
    live_postgres,
    transaction,
)
from bot.core.storage.erasures import create_erasure_table
from bot.core.storage.fairness import urgent_write
from bot.core.storage.schema import create_tables
from bot.service.decisions.queries import DECISIONS_SCHEMA, DecisionQueries
from bot.service.github.pacing import PACING_SCHEMA
from bot.service.queue.deliveries import NewDelivery, Recorded, record_deliveries
from bot.service.queue.jobs import Job
from bot.service.repo_errors import SCHEMA as REPO_ERRORS_SCHEMA
from bot.service.review.tables import REVIEW_SCHEMA

__all__ = ["Store", "StoreUnavailable", "connect_sqlite", "transaction"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, event TEXT NOT NULL, action TEXT NOT NULL, payload TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id {serial} PRIMARY KEY, delivery_id TEXT NOT NULL UNIQUE REFERENCES deliveries(id),
    event TEXT NOT NULL, action TEXT NOT NULL, issue_key TEXT NOT NULL, status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, next_attempt_at DOUBLE PRECISION NOT NULL,
    received_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
    lease_token TEXT, lease_expires_at DOUBLE PRECISION);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (status, next_attempt_at);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_one_running_per_issue ON jobs (issue_key) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS jobs_queued_by_issue ON jobs (issue_key) WHERE status = 'queued';
CREATE INDEX IF NOT EXISTS jobs_by_issue ON jobs (issue_key);
CREATE TABLE IF NOT EXISTS redeliveries (guid TEXT PRIMARY KEY, asked_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY, ready INTEGER NOT NULL, beat_at DOUBLE PRECISION NOT NULL);
"""
# Columns added after the first release: added to an older database at start-up.
MIGRATIONS = (("jobs", "lease_token", "TEXT"), ("jobs", "lease_expires_at", "DOUBLE PRECISION"),
              ("jobs", "write_slot", "DOUBLE PRECISION"), ("jobs", "prepared", "TEXT"))
JOB_COLUMNS = ("id, delivery_id, event, action, issue_key, status, attempts, last_error, received_at, "
               "lease_token, write_slot")
# The oldest due job whose issue has no job running: one issue's jobs never race for its comment.
CLAIM = f"""
UPDATE jobs SET status = 'running', attempts = attempts + 1, updated_at = ?, lease_token = ?,
    lease_expires_at = ?
WHERE id = (SELECT q.id FROM jobs q WHERE q.status = 'queued' AND q.next_attempt_at <= ?
            AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.status = 'running' AND r.issue_key = q.issue_key)
            ORDER BY q.next_attempt_at, q.id LIMIT 1 {{lock}})
RETURNING {JOB_COLUMNS}"""
# Every outcome write names the lease it holds: a worker whose lease was taken over changes nothing.
OWNED = "WHERE id = ? AND lease_token = ? AND status = 'running'"

class Store(DecisionQueries):
    """One connection guarded by a lock; every method is one transaction. SQL is shared by both engines."""

    def __init__(self, url: str, busy_timeout_s: float = 30.0, urgent: bool = False) -> None:
        """`busy_timeout_s` bounds each wait: for this object's lock, SQLite's write lock, a PG statement.
        An `urgent` store (the webhook's intake) goes before bulk deletions for SQLite's write lock
        (bot.core.storage.fairness); its wait for that priority, bounded the same, meets only a bulk writer's
        check between two batches (an instant)."""
        self.url = url
        self.busy_timeout_s = busy_timeout_s
        self.urgent = urgent  # a no-op on PostgreSQL (fairness's sidecar is SQLite's alone)
        self._lock = threading.Lock()
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        self._conn: Any = self._connect()
        serial = "BIGSERIAL" if self.postgres else "INTEGER"
        with self._tx() as run:
            create_tables(run, self.postgres, (SCHEMA + DECISIONS_SCHEMA + PACING_SCHEMA + REVIEW_SCHEMA).format(
                serial=serial))
            create_erasure_table(run, self.postgres)
            create_tables(run, self.postgres, REPO_ERRORS_SCHEMA)
            for table, column, kind in MIGRATIONS:
                self._add_column(run, table, column, kind)

    def _connect(self) -> Any:
        if self.postgres:
            return connect_postgres(self.url, self.busy_timeout_s)
        return connect_sqlite(self.url, self.busy_timeout_s)

    def _add_column(self, run: Any, table: str, column: str, kind: str) -> None:
        if self.postgres:
            run(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {kind}")
            return
        names = {row[1] for row in run(f"PRAGMA table_info({table})").fetchall()}
        if column not in names:
            run(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def transaction(self) -> Any:
        """One transaction (a `run(sql, params)` callable), for the store's sibling modules and the decision
        queries it inherits."""
        return self._tx()

    def ping(self) -> None:
        """Raise unless the database answers and, on SQLite, has room to store a delivery (the readiness
        check: a full database answers reads, so a bare SELECT would call it ready)."""
        with self._tx() as run:
            run("SELECT 1").fetchone()
            if not self.postgres:
                check_room(run, self.url)

    def pragma(self, statement: str) -> list[tuple[Any, ...]]:
        """`PRAGMA statement` on this store's own connection: SQLite keeps most of them per connection."""
        if self.postgres:
            raise ConfigError("PRAGMA is an SQLite statement; this store is on PostgreSQL")
        with self._lock:
            return list(self._conn.execute(f"PRAGMA {statement}").fetchall())

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        if not self._lock.acquire(timeout=self.busy_timeout_s):
            raise StoreUnavailable(f"the database is busy: no connection free within {self.busy_timeout_s:g}s")
        try:
            with self._tx_locked() as run:
                yield run
        finally:
            self._lock.release()

    @contextmanager
    def _tx_locked(self) -> Iterator[Any]:
        if self.postgres:  # the server restarted: a new connection, or StoreUnavailable while it is down
            self._conn = live_postgres(self._conn, self._connect)
        with urgent_write(self.url, self.busy_timeout_s) if self.urgent else nullcontext(), \
                transaction(self._conn, self.postgres) as run:
            yield run

    # --- deliveries and jobs ------------------------------------------------------------------------------

    def record_delivery(self, delivery_id: str, event: str, action: str, payload: str, issue_key: str
                        ) -> Recorded:
        """Store a delivery and queue its job; (False, job id) for a delivery seen before.

        A redelivered id whose job had failed for good is queued again (GitHub's "Redeliver" is the retry).
        """
        return self.record_deliveries([NewDelivery(delivery_id, event, action, payload, issue_key)])[0]

    def record_deliveries(self, deliveries: Sequence[NewDelivery]) -> list[Recorded]:
        """`record_delivery` for several deliveries in one transaction (the webhook's group commit)."""
        with self._tx() as run:
            return record_deliveries(run, deliveries, self.postgres)

    def delivery_payload(self, delivery_id: str) -> str:
        with self._tx() as run:
            row = run("SELECT payload FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
        if row is None:
            raise KeyError(delivery_id)
        return str(row[0])

    def claim_job(self, now: float | None = None, lease_s: float = 60.0) -> Job | None:
        """Atomically take the next due job under a new lease (status 'running', one more attempt), or None."""
        now = time.time() if now is None else now
        lock = "FOR UPDATE SKIP LOCKED" if self.postgres else ""
        token = uuid.uuid4().hex
        try:
            with self._tx() as run:
                row = run(CLAIM.format(lock=lock), (now, token, now + lease_s, now)).fetchone()
        except Exception as exc:
            if _is_integrity_error(exc):  # another worker took a job of the same issue at the same instant
                return None
            raise
        return job_from_row(row) if row else None

    def heartbeat(self, job_id: int, token: str, lease_s: float) -> bool:
        """Extend the lease; False when it is no longer ours (expired and taken over)."""
        with self._tx() as run:
            return bool(run(f"UPDATE jobs SET lease_expires_at = ? {OWNED}",
                            (time.time() + lease_s, job_id, token)).rowcount)

    def finish_job(self, job_id: int, token: str | None) -> bool:
        """Mark the job done if we still hold its lease; False when another worker owns it now."""
        return self._set_status(job_id, token, "done", None)

    def fail_job(self, job_id: int, token: str | None, error: str) -> bool:
        """Keep a job that will not succeed, with its error, for an operator (or a redelivery)."""
        return self._set_status(job_id, token, "failed", error)

    def retry_job(self, job_id: int, token: str | None, error: str, delay_s: float,
                  spend_attempt: bool = True, write_slot: float | None = None) -> bool:
        """Queue the job again after `delay_s`; a rate-limit wait gives its attempt back. `write_slot`: the
        write the job booked (its next run writes then without booking again; see `pacing.py`)."""
        now = time.time()
        give_back = 0 if spend_attempt else 1
        with self._tx() as run:
            return bool(run("UPDATE jobs SET status = 'queued', last_error = ?, next_attempt_at = ?, "
                            f"updated_at = ?, attempts = attempts - ?, lease_token = NULL, write_slot = ? {OWNED}",
                            (error, now + delay_s, now, give_back, write_slot, job_id, token)).rowcount)

    def requeue_running(self, now: float | None = None) -> int:
        """Jobs left 'running' whose lease has expired (their worker died) are queued again."""
        now = time.time() if now is None else now
        with self._tx() as run:
            return int(run("UPDATE jobs SET status = 'queued', next_attempt_at = ?, updated_at = ?, "
                           "lease_token = NULL WHERE status = 'running' AND COALESCE(lease_expires_at, 0) < ?",
                           (now, now, now)).rowcount)

    def _set_status(self, job_id: int, token: str | None, status: str, error: str | None) -> bool:
        with self._tx() as run:
            return bool(run("UPDATE jobs SET status = ?, last_error = COALESCE(?, last_error), updated_at = ?, "
                            f"lease_token = NULL {OWNED}",
                            (status, error, time.time(), job_id, token)).rowcount)

    def job(self, job_id: int) -> Job:
        with self._tx() as run:
            row = run(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise KeyError(job_id)
        return job_from_row(row)

    def job_counts(self) -> dict[str, int]:
        with self._tx() as run:
            rows = run("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
        return {str(status): int(n) for status, n in rows}


def job_from_row(row: Sequence[Any]) -> Job:
    keys = [key.strip() for key in JOB_COLUMNS.split(",")]
    return Job.model_validate(dict(zip(keys, row, strict=True)))


def _is_integrity_error(exc: Exception) -> bool:
    if isinstance(exc, sqlite3.IntegrityError):
        return True
    import psycopg

    return isinstance(exc, psycopg.IntegrityError)
