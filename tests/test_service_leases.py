"""Leases, shared write pacing, queue administration and retention, on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.github.pacing import reserve_write
from bot.service.queue.store import Store
from bot.service.queue.upkeep import list_jobs, retry_jobs
from bot.service.retention.policy import prune
from tests.fake_github import REPO, FakeGitHub, app_settings_for, deliver, issue_payload, running_service, wait_idle
from tests.test_service_store import _new_database, postgres_cluster, postgres_server  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite3'}"
    return _new_database(request.getfixturevalue("postgres_server"))


@pytest.fixture
def stores(url: str) -> Iterator[tuple[Store, Store]]:
    """Two replicas' connections to one database."""
    a, b = Store(url), Store(url)
    yield a, b
    a.close()
    b.close()


def _record(store: Store, delivery: str, issue: str = "o/r#1") -> None:
    store.record_delivery(delivery, "issues", "opened", "{}", issue)


def test_a_lease_is_taken_over_only_after_it_expires_and_the_old_owner_then_changes_nothing(
        stores: tuple[Store, Store]) -> None:
    a, b = stores
    _record(a, "d-1")
    slow = a.claim_job(lease_s=30)
    assert slow is not None and slow.lease_token
    assert b.requeue_running() == 0 and b.claim_job() is None, "the lease still runs"
    later = time.time() + 31
    assert b.requeue_running(now=later) == 1
    taken = b.claim_job(now=later)
    assert taken is not None and taken.id == slow.id and taken.lease_token != slow.lease_token
    assert not a.heartbeat(slow.id, slow.lease_token or "", 30), "A learns its lease is gone"
    assert not a.finish_job(slow.id, slow.lease_token)
    assert not a.retry_job(slow.id, slow.lease_token, "late", 1.0)
    assert not a.fail_job(slow.id, slow.lease_token, "late")
    assert b.job(slow.id).status == "running", "A's late writes did not touch B's run"
    assert b.heartbeat(taken.id, taken.lease_token or "", 30)
    assert b.finish_job(taken.id, taken.lease_token)
    assert a.job_counts() == {"done": 1}


def test_a_heartbeat_keeps_a_slow_job_from_being_taken_over(stores: tuple[Store, Store]) -> None:
    a, b = stores
    _record(a, "d-1")
    job = a.claim_job(lease_s=1.0)
    assert job is not None
    assert a.heartbeat(job.id, job.lease_token or "", 60.0)
    assert b.requeue_running(now=time.time() + 30) == 0


def test_a_rate_limit_wait_gives_its_attempt_back(stores: tuple[Store, Store]) -> None:
    a, _ = stores
    _record(a, "d-1")
    job = a.claim_job()
    assert job is not None and job.attempts == 1
    assert a.retry_job(job.id, job.lease_token, "403 secondary rate limit", 0.0, spend_attempt=False)
    again = a.claim_job()
    assert again is not None and again.attempts == 1


def test_write_bookings_from_two_replicas_are_an_interval_apart(stores: tuple[Store, Store]) -> None:
    a, b = stores
    slots: list[float] = []
    lock = threading.Lock()

    def book(store: Store) -> None:
        for _ in range(10):
            at = reserve_write(store, 77, 1.0)
            with lock:
                slots.append(at)

    threads = [threading.Thread(target=book, args=(s,)) for s in (a, b, a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    slots.sort()
    assert len(slots) == 40
    assert min(later - earlier for earlier, later in itertools.pairwise(slots)) >= 1.0 - 1e-6
    assert reserve_write(a, 78, 1.0) <= time.time(), "another installation is not held back"


def test_failed_jobs_are_listed_and_retried_with_fresh_attempts(stores: tuple[Store, Store]) -> None:
    a, _ = stores
    for i in range(3):
        _record(a, f"d-{i}", issue=f"o/r#{i}")
    for _ in range(2):
        job = a.claim_job()
        assert job is not None
        a.fail_job(job.id, job.lease_token, "GitHub answered 500 (after 12 attempts)")
    failed = list_jobs(a, "failed")
    assert [j.status for j in failed] == ["failed", "failed"] and "500" in (failed[0].last_error or "")
    assert retry_jobs(a, [failed[0].id]) == 1
    assert a.job(failed[0].id).status == "queued" and a.job(failed[0].id).attempts == 0
    assert retry_jobs(a) == 1
    assert a.job_counts() == {"queued": 3}


def test_retention_forgets_old_finished_and_failed_work_with_its_payloads_and_keeps_queued(
        stores: tuple[Store, Store]) -> None:
    a, _ = stores
    for i in range(3):
        _record(a, f"d-{i}", issue=f"o/r#{i}")
    for status in ("done", "failed"):
        job = a.claim_job()
        assert job is not None
        (a.finish_job(job.id, job.lease_token) if status == "done"
         else a.fail_job(job.id, job.lease_token, "permanent"))
    assert set(prune(a, days=30).values()) == {0}
    gone = prune(a, days=30, now=time.time() + 31 * 86400)
    assert gone["jobs"] == 2 and gone["deliveries"] == 2, "a failed job's payload (the issue's text) goes too"
    assert a.job_counts() == {"queued": 1}


def test_two_replicas_on_one_postgresql_pace_their_writes_together(
        settings: Settings, engine: Engine, postgres_server: str, tmp_path: Path) -> None:  # noqa: F811
    interval = 1.0  # arrivals jitter by the test process's load; the bookings themselves are exact
    numbers = range(42, 48)
    with FakeGitHub().running() as github:
        github.add_repo(REPO)
        payloads = [issue_payload(github, number=n) for n in numbers]
        shared = app_settings_for(settings, github, tmp_path, database_url=_new_database(postgres_server),
                                  write_interval_s=interval)
        with running_service(shared, engine) as a, running_service(shared, engine) as b:
            for i, payload in enumerate(payloads):
                assert deliver(a if i % 2 else b, payload).status_code == 202
            assert wait_idle(a, timeout=60) == {"done": len(payloads)}
        posts = sorted(r.at for r in github.requests if r.method == "POST" and r.path.endswith("/comments"))
        assert {n: len(github.bot_comments(REPO, n)) for n in numbers} == dict.fromkeys(numbers, 1)
    assert len(posts) == len(payloads)
    gaps = [later - earlier for earlier, later in itertools.pairwise(posts)]
    assert min(gaps) >= interval - 0.25, f"two writes to one installation {min(gaps):.3f}s apart"
