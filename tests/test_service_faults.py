"""Faults an operator meets: a locked or failing database, a GitHub outage of (scaled) minutes, rate
limits and dropped connections. Every test ends with exactly one comment per issue, no manual redelivery."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.handlers.dispatch import execute_job
from bot.service.queue.jobs import Job
from bot.service.queue.worker import Worker
from bot.service.state import ServiceState
from tests.fake_github import (
    DROP,
    REPO,
    FakeGitHub,
    deliver,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
    wait_until,
)

NUMBERS = (42, 43, 44, 45, 46)



def database_file(settings: Settings) -> Path:
    return Path(settings.sqlite_url.removeprefix("sqlite:///"))


class WriteLock:
    """Another process's transaction holding SQLite's write lock, as long as the block runs."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def __enter__(self) -> WriteLock:
        self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def assert_one_comment_each(github: FakeGitHub, numbers: tuple[int, ...] = NUMBERS) -> None:
    assert {n: len(github.bot_comments(REPO, n)) for n in numbers} == dict.fromkeys(numbers, 1)


def test_a_locked_database_gets_503_with_retry_after_and_the_worker_carries_on(
        app_settings: Settings, engine: Engine, github: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    settings = app_settings.model_copy(update={"ack_timeout_s": 0.3})
    with running_service(settings, engine) as client:
        held, answered, released = threading.Event(), threading.Event(), threading.Event()

        def hold() -> None:  # until the answer is in (or a generous deadline: an ack that waits ends, not hangs)
            with WriteLock(database_file(settings)):
                held.set()
                answered.wait(60)
            released.set()

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert held.wait(60)
            refused = deliver(client, issue_payload(github, number=42), delivery_id="refused")
            answered_while_held = not released.is_set()
        finally:
            answered.set()
            holder.join()
        assert answered_while_held, "the ack waited for the lock instead of answering within ack_timeout_s"
        assert refused.status_code == 503 and refused.headers["retry-after"] == "60"
        assert state_of(client).worker_alive()
        for number in NUMBERS:  # GitHub's redelivery of the refused one, and the others
            again = deliver(client, issue_payload(github, number=number), delivery_id=f"d-{number}"
                            if number != 42 else "refused")
            assert again.status_code in (200, 202), "202, or 200 where the refused insert landed after all"
        assert wait_idle(client) == {"done": len(NUMBERS)}
    assert_one_comment_each(github)


def test_the_worker_survives_a_failed_outcome_write_and_the_job_ends_in_one_comment(
        app_settings: Settings, engine: Engine, github: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    """`finish_job` fails (the database is locked after the comment is written); the lease runs out and the
    job is run again, finds its comment by the marker and posts nothing new."""
    settings = app_settings.model_copy(update={"job_lease_s": 0.6})
    locks: list[threading.Thread] = []

    def execute_then_lock(state: ServiceState, job: Job) -> str:
        outcome = execute_job(state, job)
        if not locks:
            held = threading.Event()

            def hold() -> None:  # until the worker has failed to record the outcome
                with WriteLock(database_file(settings)):
                    held.set()
                    wait_until(lambda: "its outcome could not be recorded" in caplog.text)

            lock = threading.Thread(target=hold)
            lock.start()
            locks.append(lock)  # only once started: the test joins it as soon as it is in the list
            held.wait()
        return outcome

    with running_service(settings, engine, run_worker=False) as client:
        state = state_of(client)
        state.store.busy_timeout_s = 0.2
        state.store._conn.execute("PRAGMA busy_timeout = 200")
        worker = Worker(state, execute=execute_then_lock)
        worker.start()
        try:
            deliver(client, issue_payload(github, number=42))
            wait_until(lambda: bool(locks))
            locks[0].join()
            wait_idle(client)
            assert worker.alive
            assert state.store.job_counts() == {"done": 1}
        finally:
            worker.stop(5.0)
            locks[0].join()
    assert "its outcome could not be recorded" in caplog.text
    assert_one_comment_each(github, (42,))


def test_a_fifteen_minute_outage_then_rate_limits_and_drops_end_in_one_comment_per_issue(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    """Time scaled 1:500: the default backoff (5 s doubling to 15 min, 12 attempts) against 15 minutes of
    502, then a secondary rate limit (403 + retry-after), then 429, then dropped connections."""
    scale = 1 / 500
    defaults = Settings()
    settings = app_settings.model_copy(update={
        "max_attempts": defaults.max_attempts, "retry_base_s": defaults.retry_base_s * scale,
        "retry_max_s": defaults.retry_max_s * scale})
    github.outage((900 * scale, 502, {}), (0.5, 403, {"retry-after": "1"}), (0.5, 429, {"retry-after": "1"}),
                  (0.3, DROP, {}))
    started = time.monotonic()
    with running_service(settings, engine) as client:
        for number in NUMBERS:
            assert deliver(client, issue_payload(github, number=number)).status_code == 202
        assert wait_idle(client) == {"done": len(NUMBERS)}
        jobs = [state_of(client).store.job(i) for i in range(1, len(NUMBERS) + 1)]
    assert time.monotonic() - started >= 900 * scale + 1.0, "the jobs waited the outage out"
    assert_one_comment_each(github)
    assert all(1 < job.attempts < defaults.max_attempts for job in jobs), "retried, with attempts left over"
    assert all(job.last_error for job in jobs)


def test_a_poison_job_ends_failed_with_its_error(app_settings: Settings, engine: Engine, github: FakeGitHub,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    def explode(state: ServiceState, job: Job) -> str:
        raise KeyError("a bug in a handler")

    with running_service(app_settings, engine, run_worker=False) as client:
        state = state_of(client)
        worker = Worker(state, execute=explode)
        worker.start()
        try:
            deliver(client, issue_payload(github, number=42))
            assert wait_idle(client) == {"failed": 1}
            job = state.store.job(1)
            assert job.attempts == app_settings.max_attempts and "KeyError" in (job.last_error or "")
            assert worker.alive
        finally:
            worker.stop(5.0)
    with caplog.at_level(logging.ERROR):
        assert "failed for good" in caplog.text
