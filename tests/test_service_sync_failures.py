"""One repository whose history cannot be listed (a fork with its issues disabled answers 410) does not stop the
history sync of its installation: it is marked failed with the reason, the others sync in full, and it is tried
again after a backoff, never first."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from bot.core.settings import Settings
from bot.memory.store import MemoryStore, SyncCursor
from bot.models.engine import Engine
from bot.service.handlers.installation import FAILED, RETRY_FIRST_S, pending_repositories, retry_at
from tests.fake_github import REPO, FakeGitHub, deliver, github_holding, running_service, state_of, wait_until
from tests.memory_helpers import INSTALLATION, installation_payload, listing_pages

BROKEN = "example-org/a-fork-without-issues"  # sorts before REPO: the old order took it first in every slice
SEEDED = 120  # two pages of 100


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding() as fake:
        fake.add_repo(BROKEN).issues_disabled = True
        fake.seed_issues(REPO, SEEDED, seed=3)
        yield fake


def settled(client: TestClient) -> bool:
    """No job runs and none is due (a job waiting for its backoff may stay queued)."""
    with sqlite3.connect(state_of(client).store.url.removeprefix("sqlite:///")) as conn:
        busy = conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'running' OR (status = 'queued' AND "
                            "next_attempt_at <= ?)", (time.time(),)).fetchone()[0]
    return int(busy) == 0


def test_a_repository_answering_410_is_marked_failed_and_the_others_sync_in_full(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_sync_pages_per_job": 1, "memory_page_interval_s": 0.0})
    with running_service(settings, private_engine) as client:
        assert deliver(client, installation_payload("created", [BROKEN, REPO]), "installation").status_code == 202
        memory = state_of(client).memory.store
        wait_until(lambda: memory.count(REPO) == SEEDED and settled(client), timeout=120)

        done, broken = memory.cursor(REPO), memory.cursor(BROKEN)
        assert done is not None and done.status == "done"
        assert broken is not None and broken.status == FAILED
        assert "410" in (broken.error or "") and "Issues are disabled" in (broken.error or "")
        assert listing_pages(github, BROKEN) == [1], "tried once, not first again in every later slice"
        assert sorted(set(listing_pages(github, REPO))) == [1, 2]
        details = client.get("/healthz/details").json()
        assert details["memory"][BROKEN]["status"] == FAILED and "410" in details["memory"][BROKEN]["error"]
        assert details["memory"][REPO] == {"status": "done", "synced": SEEDED, "page": 2}
        jobs = state_of(client).store.job_counts()
        assert "failed" not in jobs and jobs.get("queued") == 1, "the installation's job waits for the retry"

        # The fork's issues are turned on; once its backoff is over, the waiting job syncs it.
        github.repos[BROKEN].issues_disabled = False
        github.seed_issues(BROKEN, 5, seed=4)
        _backoff_over(state_of(client).store.url, BROKEN)
        state_of(client).wake_worker.set()
        wait_until(lambda: (memory.cursor(BROKEN) or broken).status == "done" and settled(client), timeout=60)
        assert memory.count(BROKEN) == 5 and memory.cursor(BROKEN).error is None  # type: ignore[union-attr]
        assert set(state_of(client).store.job_counts()) == {"done"}


def _backoff_over(url: str, repo: str) -> None:
    """As if the backoff had passed: the failure and the waiting job moved into the past."""
    past = time.time() - RETRY_FIRST_S - 1
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.execute("UPDATE memory_sync SET started_at = ?, updated_at = ? WHERE repo = ?", (past, past, repo))
        conn.execute("UPDATE jobs SET next_attempt_at = ? WHERE status = 'queued'", (past,))


def test_a_failed_repository_waits_out_a_doubling_backoff_and_comes_after_every_other(tmp_path: Path) -> None:
    store = MemoryStore(f"sqlite:///{tmp_path}/memory.sqlite3")
    try:
        now = time.time()
        for repo, status in (("o/a-failed", FAILED), ("o/b-pending", "pending"), ("o/c-running", "running")):
            store.save_cursor(SyncCursor(repo=repo, installation_id=INSTALLATION, status=status, started_at=now,
                                         error="PermanentGitHubError: 410" if status == FAILED else None))
        assert [c.repo for c in pending_repositories(store, INSTALLATION, now=now)] == ["o/c-running", "o/b-pending"]
        later = now + RETRY_FIRST_S + 5
        assert [c.repo for c in pending_repositories(store, INSTALLATION, now=later)] == [
            "o/c-running", "o/b-pending", "o/a-failed"]
    finally:
        store.close()
    failing_since = 1_000_000.0
    first = SyncCursor(repo="o/r", status=FAILED, started_at=failing_since, updated_at=failing_since)
    assert retry_at(first) == failing_since + RETRY_FIRST_S
    after_an_hour = first.model_copy(update={"updated_at": failing_since + 3600})
    assert retry_at(after_an_hour) == failing_since + 7200, "waits as long again as it has failed"
    after_a_week = first.model_copy(update={"updated_at": failing_since + 7 * 86400})
    assert retry_at(after_a_week) == failing_since + 8 * 86400, "at most a day apart"
