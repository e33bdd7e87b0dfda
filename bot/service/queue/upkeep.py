"""Queue administration and housekeeping on the service database: listing and retrying jobs, and the
workers' heartbeats (retention: `bot/service/retention/`). Each function is one transaction on a `Store`."""

from __future__ import annotations

import time

from bot.service.queue.jobs import Job
from bot.service.queue.store import JOB_COLUMNS, Store, job_from_row

DAY_S = 86400.0


def list_jobs(store: Store, status: str | None = None, limit: int = 50) -> list[Job]:
    """The latest jobs first, optionally of one status."""
    where, params = ("WHERE status = ? ", [status]) if status else ("", [])
    with store.transaction() as run:
        rows = run(f"SELECT {JOB_COLUMNS} FROM jobs {where}ORDER BY id DESC LIMIT ?", (*params, limit)).fetchall()
    return [job_from_row(row) for row in rows]


def retry_jobs(store: Store, job_ids: list[int] | None = None) -> int:
    """Queue failed jobs again with fresh attempts (those named, or every failed one); how many."""
    now = time.time()
    sql = ("UPDATE jobs SET status = 'queued', attempts = 0, next_attempt_at = ?, updated_at = ?, "
           "lease_token = NULL WHERE status = 'failed'")
    params: list[object] = [now, now]
    if job_ids is not None:
        if not job_ids:
            return 0
        sql += f" AND id IN ({', '.join('?' * len(job_ids))})"
        params += job_ids
    with store.transaction() as run:
        return int(run(sql, params).rowcount)


def worker_beat(store: Store, worker_id: str, ready: bool, now: float | None = None) -> None:
    """A worker process says it is alive (and whether its engine is loaded), for the web's readiness."""
    now = time.time() if now is None else now
    with store.transaction() as run:
        run("INSERT INTO workers (id, ready, beat_at) VALUES (?, ?, ?) ON CONFLICT (id) "
            "DO UPDATE SET ready = excluded.ready, beat_at = excluded.beat_at", (worker_id, int(ready), now))
        run("DELETE FROM workers WHERE beat_at < ?", (now - DAY_S,))


def ready_workers(store: Store, within_s: float) -> int:
    """Workers with a loaded engine that beat within `within_s`."""
    with store.transaction() as run:
        row = run("SELECT COUNT(*) FROM workers WHERE ready = 1 AND beat_at >= ?", (time.time() - within_s,)).fetchone()
    return int(row[0])


def queue_progress(store: Store, now: float | None = None) -> tuple[float, int]:
    """How long the oldest due queued job has waited (0: none is due) and how many jobs run now: the queue
    moves while jobs run or none waits (two indexed reads, for the readiness check)."""
    now = time.time() if now is None else now
    with store.transaction() as run:
        oldest = run("SELECT MIN(next_attempt_at) FROM jobs WHERE status = 'queued' AND next_attempt_at <= ?",
                     (now,)).fetchone()
        running = run("SELECT COUNT(*) FROM jobs WHERE status = 'running'").fetchone()
    return (max(0.0, now - float(oldest[0])) if oldest and oldest[0] is not None else 0.0), int(running[0])
