"""Durable state: deliveries (unique by id), jobs, decisions and feedback, on SQLite or PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bot.errors import ConfigError
from bot.service.events import Decision, Job

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, event TEXT NOT NULL, action TEXT NOT NULL, payload TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id {serial} PRIMARY KEY, delivery_id TEXT NOT NULL UNIQUE REFERENCES deliveries(id),
    event TEXT NOT NULL, action TEXT NOT NULL, issue_key TEXT NOT NULL, status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, next_attempt_at DOUBLE PRECISION NOT NULL,
    received_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (status, next_attempt_at);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_one_running_per_issue ON jobs (issue_key) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS decisions (
    delivery_id TEXT PRIMARY KEY, repo TEXT NOT NULL, number INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, decision TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS feedback (
    id {serial} PRIMARY KEY, delivery_id TEXT NOT NULL, repo TEXT NOT NULL, number INTEGER NOT NULL,
    axis TEXT NOT NULL, value TEXT NOT NULL, author TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, UNIQUE (delivery_id, axis));
"""
JOB_COLUMNS = "id, delivery_id, event, action, issue_key, status, attempts, last_error, received_at"
# The oldest due job whose issue has no job running: one issue's jobs never race for its comment.
CLAIM = f"""
UPDATE jobs SET status = 'running', attempts = attempts + 1, updated_at = ?
WHERE id = (SELECT q.id FROM jobs q WHERE q.status = 'queued' AND q.next_attempt_at <= ?
            AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.status = 'running' AND r.issue_key = q.issue_key)
            ORDER BY q.next_attempt_at, q.id LIMIT 1 {{lock}})
RETURNING {JOB_COLUMNS}"""


class Store:
    """One connection guarded by a lock; every method is one transaction. SQL is shared by both engines."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        self._conn: Any = _connect_postgres(url) if self.postgres else _connect_sqlite(url)
        serial = "BIGSERIAL" if self.postgres else "INTEGER"
        with self._tx() as run:
            for statement in SCHEMA.format(serial=serial).split(";"):
                if statement.strip():
                    run(statement)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._lock:
            if self.postgres and (self._conn.closed or self._conn.broken):  # the server restarted: reconnect
                self._conn = _connect_postgres(self.url)
            cur = self._conn.cursor()

            def run(sql: str, params: Sequence[Any] = ()) -> Any:
                cur.execute(sql.replace("?", "%s") if self.postgres else sql, tuple(params))
                return cur

            try:
                if not self.postgres:
                    cur.execute("BEGIN IMMEDIATE")
                yield run
                self._conn.commit()
            except BaseException:
                self._conn.rollback()
                raise
            finally:
                cur.close()

    # --- deliveries and jobs ------------------------------------------------------------------------------

    def record_delivery(self, delivery_id: str, event: str, action: str, payload: str, issue_key: str
                        ) -> tuple[bool, int | None]:
        """Store a delivery and queue its job; (False, job id) for a delivery seen before.

        A redelivered id whose job had failed for good is queued again (GitHub's "Redeliver" is the retry).
        """
        now = time.time()
        with self._tx() as run:
            inserted = run("INSERT INTO deliveries (id, event, action, payload, received_at) "
                           "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
                           (delivery_id, event, action, payload, now)).fetchone()
            if inserted is None:
                row = run("UPDATE jobs SET status = 'queued', attempts = 0, next_attempt_at = ?, "
                          "updated_at = ? WHERE delivery_id = ? AND status = 'failed' RETURNING id",
                          (now, now, delivery_id)).fetchone()
                return False, row[0] if row else None
            row = run("INSERT INTO jobs (delivery_id, event, action, issue_key, status, next_attempt_at, "
                      "received_at, updated_at) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?) RETURNING id",
                      (delivery_id, event, action, issue_key, now, now, now)).fetchone()
            return True, int(row[0])

    def delivery_payload(self, delivery_id: str) -> str:
        with self._tx() as run:
            row = run("SELECT payload FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
        if row is None:
            raise KeyError(delivery_id)
        return str(row[0])

    def claim_job(self, now: float | None = None) -> Job | None:
        """Atomically take the next due job (status 'running', one more attempt), or None."""
        now = time.time() if now is None else now
        lock = "FOR UPDATE SKIP LOCKED" if self.postgres else ""
        try:
            with self._tx() as run:
                row = run(CLAIM.format(lock=lock), (now, now)).fetchone()
        except Exception as exc:
            if _is_integrity_error(exc):  # another worker took a job of the same issue at the same instant
                return None
            raise
        return _job(row) if row else None

    def finish_job(self, job_id: int) -> None:
        self._set_status(job_id, "done", None)

    def fail_job(self, job_id: int, error: str) -> None:
        """Keep a job that will not succeed, with its error, for an operator (or a redelivery)."""
        self._set_status(job_id, "failed", error)

    def retry_job(self, job_id: int, error: str, delay_s: float) -> None:
        now = time.time()
        with self._tx() as run:
            run("UPDATE jobs SET status = 'queued', last_error = ?, next_attempt_at = ?, updated_at = ? "
                "WHERE id = ?",
                (error, now + delay_s, now, job_id))

    def requeue_running(self, stale_after_s: float = 0.0) -> int:
        """Jobs a crash or a restart left 'running' (for `stale_after_s` at least) are queued again."""
        now = time.time()
        with self._tx() as run:
            return int(run("UPDATE jobs SET status = 'queued', next_attempt_at = ?, updated_at = ? "
                           "WHERE status = 'running' AND updated_at <= ?", (now, now, now - stale_after_s)).rowcount)

    def _set_status(self, job_id: int, status: str, error: str | None) -> None:
        with self._tx() as run:
            run("UPDATE jobs SET status = ?, last_error = COALESCE(?, last_error), updated_at = ? "
                "WHERE id = ?",
                (status, error, time.time(), job_id))

    def job(self, job_id: int) -> Job:
        with self._tx() as run:
            row = run(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise KeyError(job_id)
        return _job(row)

    def job_counts(self) -> dict[str, int]:
        with self._tx() as run:
            rows = run("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
        return {str(status): int(n) for status, n in rows}

    # --- decisions and feedback ---------------------------------------------------------------------------

    def save_decision(self, decision: Decision) -> None:
        """One decision per delivery; a retried job overwrites its own."""
        data = decision.model_copy(update={"created_at": time.time()})
        with self._tx() as run:
            run("INSERT INTO decisions (delivery_id, repo, number, created_at, decision) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (delivery_id) "
                "DO UPDATE SET created_at = excluded.created_at, decision = excluded.decision",
                (data.delivery_id, data.repo, data.number, data.created_at, data.model_dump_json()))

    def decisions(self, limit: int = 50, repo: str | None = None) -> list[Decision]:
        """The latest decisions first."""
        where, params = ("WHERE repo = ? ", [repo]) if repo else ("", [])
        with self._tx() as run:
            rows = run(f"SELECT decision FROM decisions {where}ORDER BY created_at DESC LIMIT ?",
                       (*params, limit)).fetchall()
        return [Decision.model_validate_json(row[0]) for row in rows]

    def save_feedback(self, delivery_id: str, repo: str, number: int, author: str, title: str, body: str,
                      corrections: dict[str, str]) -> None:
        """A maintainer's corrections: each one a labelled case (the issue text with the axis value)."""
        now = time.time()
        with self._tx() as run:
            for axis, value in corrections.items():
                run("INSERT INTO feedback (delivery_id, repo, number, axis, value, author, title, body, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (delivery_id, axis) DO NOTHING",
                    (delivery_id, repo, number, axis, value, author, title, body, now))

    def corrections(self, repo: str, number: int) -> dict[str, str]:
        """The latest correction per axis for one issue."""
        with self._tx() as run:
            rows = run("SELECT axis, value FROM feedback WHERE repo = ? AND number = ? "
                       "ORDER BY created_at, id", (repo, number)).fetchall()
        return {str(axis): str(value) for axis, value in rows}

    def feedback_cases(self) -> list[dict[str, Any]]:
        """Every correction as a labelled case, oldest first."""
        with self._tx() as run:
            rows = run("SELECT repo, number, axis, value, author, title, body FROM feedback "
                       "ORDER BY id").fetchall()
        keys = ("repo", "number", "axis", "value", "author", "title", "body")
        return [dict(zip(keys, row, strict=True)) for row in rows]


def _job(row: Sequence[Any]) -> Job:
    keys = [key.strip() for key in JOB_COLUMNS.split(",")]
    return Job.model_validate(dict(zip(keys, row, strict=True)))


def _is_integrity_error(exc: Exception) -> bool:
    if isinstance(exc, sqlite3.IntegrityError):
        return True
    import psycopg

    return isinstance(exc, psycopg.IntegrityError)


def _connect_sqlite(url: str) -> sqlite3.Connection:
    if not url.startswith("sqlite:///"):
        raise ConfigError(f"DDL_TRIAGE_DATABASE_URL {url!r} is not supported; use sqlite:///PATH or "
                          "postgresql://USER@HOST/DB")
    path = url.removeprefix("sqlite:///")
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _connect_postgres(url: str) -> Any:
    import psycopg

    try:
        return psycopg.connect(url)
    except psycopg.OperationalError as exc:
        raise ConfigError(f"DDL_TRIAGE_DATABASE_URL: cannot connect to PostgreSQL: {exc}".strip()) from None
