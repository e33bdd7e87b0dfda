"""History sync against the fake GitHub (real PyGithub, real embeddings, real SQLite): every issue once,
how each was closed, resumable from its cursor after a stop or a restart of the service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.core.settings import Settings
from bot.memory.store import MemoryStore
from bot.memory.sync import ReadsExhausted, sync_repository
from bot.models.engine import Engine
from bot.service.handlers.dispatch import execute_job
from bot.service.queue.jobs import Job
from bot.service.queue.worker import Worker
from bot.service.state import ServiceState
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    github_holding,
    running_service,
    state_of,
    wait_idle,
    wait_until,
)
from tests.memory_helpers import installation_client, installation_payload, listing_pages

SEEDED = 250


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "question", "zero", "fsdp"]) as fake:
        fake.seed_issues(REPO, SEEDED)
        yield fake


@pytest.fixture
def memory_db(tmp_path: Path) -> Iterator[MemoryStore]:
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite3'}")
    yield store
    store.close()


def test_a_history_sync_stores_every_issue_once_oldest_first_with_how_it_was_closed(
        github: FakeGitHub, engine: Engine, memory_db: MemoryStore) -> None:
    cursor = sync_repository(installation_client(github), memory_db, engine.embedder, REPO)
    assert cursor.status == "done" and cursor.synced == SEEDED
    stored = memory_db.issues(REPO)
    assert [i.number for i in stored] == list(range(1, SEEDED + 1))
    seeded = github.repos[REPO].issues
    for issue in stored:
        source = seeded[issue.number]
        assert issue.title == source["title"] and issue.state == source["state"]
        assert issue.type == ("pull_request" if source.get("pull_request") else "issue")
        assert issue.labels == [label["name"] for label in source["labels"]]
        if source["state_reason"] == "completed":
            assert issue.closed_by == f"#{issue.number + 10_000}"
        if source["state_reason"] == "duplicate":
            assert issue.duplicate_of is not None and issue.duplicate_of < issue.number
    reasons = {i.state_reason for i in stored}
    assert {"completed", "not_planned", "duplicate", None} <= reasons
    assert listing_pages(github, REPO) == [1, 2, 3], "100 per page, Link-paginated, each page read once"


def test_a_sync_stopped_after_one_page_resumes_at_the_next_page_in_a_new_process_without_duplicates(
        github: FakeGitHub, engine: Engine, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.sqlite3'}"
    first = MemoryStore(url)
    cursor = sync_repository(installation_client(github), first, engine.embedder, REPO, max_pages=1)
    first.close()
    assert cursor.status == "running" and cursor.page == 2 and cursor.synced == 100
    again = MemoryStore(url)  # a fresh connection, as after a restart
    cursor = sync_repository(installation_client(github), again, engine.embedder, REPO)
    assert cursor.status == "done" and again.count(REPO) == SEEDED
    assert listing_pages(github, REPO) == [1, 2, 3]
    again.close()


def test_a_limit_stops_inside_a_page_and_the_next_run_finishes_it(
        github: FakeGitHub, engine: Engine, memory_db: MemoryStore) -> None:
    client = installation_client(github)
    cursor = sync_repository(client, memory_db, engine.embedder, REPO, limit=130)
    assert (cursor.status, cursor.page, memory_db.count(REPO)) == ("running", 2, 130)
    cursor = sync_repository(client, memory_db, engine.embedder, REPO)
    assert cursor.status == "done" and memory_db.count(REPO) == SEEDED


def test_the_reserve_is_kept_per_request_not_per_page_and_the_page_resumes_where_it_stopped(
        engine: Engine, memory_db: MemoryStore) -> None:
    """A page of 100 closed issues makes 101 requests (the listing, a timeline each): against the reserve of
    100 with 130 requests left, the sync stops at the reserve inside the page, keeps what it read, and after
    the reset reads no timeline twice."""
    closed = "example-org/all-closed"
    with github_holding(labels=["bug"]) as github:
        github.add_repo(closed, labels=["bug"])
        for issue in github.seed_issues(closed, 100, seed=3):
            issue.pop("pull_request", None)
            github.close_issue(closed, issue, "completed", fixed_by=issue["number"] + 10_000)
        github.limit_rate(remaining=130, reset_in_s=3600)
        with pytest.raises(ReadsExhausted):
            sync_repository(installation_client(github), memory_db, engine.embedder, closed)
        timelines = [r.path for r in github.requests if r.path.endswith("/timeline")]
        assert github.rate_remaining() == 100, "not one request past the reserve"
        assert len(timelines) == 29 and memory_db.count(closed) == 29, "the listing and 29 timelines, kept"
        cursor = memory_db.cursor(closed)
        assert cursor is not None and (cursor.status, cursor.page) == ("running", 1)

        github.limit_rate(remaining=5000, reset_in_s=3600)  # the hour is over: the next job's client
        cursor = sync_repository(installation_client(github), memory_db, engine.embedder, closed)
        timelines = [r.path for r in github.requests if r.path.endswith("/timeline")]
    assert cursor.status == "done" and memory_db.count(closed) == 100
    assert len(timelines) == 100 and len(set(timelines)) == 100, "each timeline read once"
    assert all(i.closed_by == f"#{i.number + 10_000}" for i in memory_db.issues(closed))


def test_installing_the_app_syncs_the_repository_in_slices_and_a_service_restart_resumes(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_sync_pages_per_job": 1, "memory_page_interval_s": 0.0})
    with running_service(settings, engine, run_worker=False) as client:
        state = state_of(client)

        def one_job_then_stop(state: ServiceState, job: Job) -> str:
            outcome = execute_job(state, job)
            worker.request_stop()  # the worker takes no other job: the service stops after the first slice
            return outcome

        worker = Worker(state, execute=one_job_then_stop)
        worker.start()
        assert deliver(client, installation_payload("created", [REPO]), "installation").status_code == 202
        wait_until(lambda: not worker.alive, timeout=120)  # it ran one job, the first slice, and stopped
        memory = state.memory
        assert memory is not None
        cursor = memory.store.cursor(REPO)
        assert memory.store.count(REPO) == 100 and cursor is not None and cursor.status == "running"
        assert state.store.job_counts() == {"done": 1, "queued": 1}, "the rest waits as a queued continuation"
    # The service stopped mid-sync (one slice of 100 done); a new one picks the queued rest up.
    with running_service(settings, engine) as client:
        counts = wait_idle(client, timeout=120)
        memory = state_of(client).memory
        assert memory is not None
        assert counts == {"done": sum(counts.values())}
        assert memory.store.count(REPO) == SEEDED
        cursor = memory.store.cursor(REPO)
        assert cursor is not None and cursor.status == "done"
        health = client.get("/healthz/details").json()  # per repository: behind the ops token
        assert health["memory"][REPO]["status"] == "done" and health["memory"][REPO]["synced"] == SEEDED
    pages = listing_pages(github, REPO)
    assert pages.count(1) == 1 and sorted(set(pages)) == [1, 2, 3]
