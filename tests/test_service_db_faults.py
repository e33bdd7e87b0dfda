"""The database fails under the running service and comes back: PostgreSQL restarted under load, an SQLite
database whose disk is full and then freed. Each test ends with exactly one comment per issue, the worker
alive, and no delivery redelivered by hand (a refused one comes back through the missed-delivery sweep)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.queue.recovery import recover_missed
from bot.service.state import ServiceState
from tests.fake_github import (
    REPO,
    FakeGitHub,
    app_settings_for,
    deliver,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
    wait_until,
)
from tests.services import missing_service
from tests.test_service_store import PostgresCluster, _new_database, postgres_cluster  # noqa: F401  (a fixture)

QUEUED = tuple(range(100, 130))  # delivered before the fault: 30 jobs in the queue when it strikes
DURING = tuple(range(200, 205))  # delivered while the database cannot take them


def bot_comment_counts(github: FakeGitHub, numbers: tuple[int, ...]) -> dict[int, int]:
    return {n: len(github.bot_comments(REPO, n)) for n in numbers}


ANSWER_DEADLINE_S = 60.0  # generous: the ack's own bound (ack_timeout_s) is a second


def refused_while_down(client: TestClient, github: FakeGitHub, numbers: tuple[int, ...]) -> int:
    """Deliver issues while the database is down: each is answered 503 + Retry-After (or stored) while it is
    still down, and GitHub keeps the refused ones as failed deliveries for the recovery sweep; how many."""
    refused = 0
    for number in numbers:
        payload = issue_payload(github, number=number)
        pool = ThreadPoolExecutor(1)  # an ack that waits on the broken store fails here, not hangs the test
        try:
            answer = pool.submit(deliver, client, payload, delivery_id=f"down-{number}").result(ANSWER_DEADLINE_S)
        finally:
            pool.shutdown(wait=False)
        assert answer.status_code in (202, 503), answer.text
        if answer.status_code == 503:
            assert int(answer.headers["retry-after"]) > 0
            github.add_hook_delivery(f"down-{number}", 503, payload)
            refused += 1
    return refused


def queue_then_wait(client: TestClient, github: FakeGitHub, numbers: tuple[int, ...], comments: int) -> None:
    """Deliver an issue for each of `numbers`, then wait until `comments` of them have the bot's comment: the
    fault then comes with the queue still draining."""
    for number in numbers:
        assert deliver(client, issue_payload(github, number=number)).status_code == 202
    wait_until(lambda: sum(bot_comment_counts(github, numbers).values()) >= comments)


def recover_refused(client: TestClient, state: ServiceState, missed: list[dict[str, Any]]) -> None:
    """The worker's periodic sweep (every ten minutes; run here at once) asks GitHub to redeliver what was
    refused; GitHub then sends each again under its own id."""
    assert state.github is not None
    recover_missed(state.github, state.store)
    for item in missed:
        assert deliver(client, item["_payload"], delivery_id=item["guid"]).status_code == 202


def test_postgresql_restarted_under_load_ends_in_one_comment_per_issue_and_the_worker_lives_on(
        settings: Settings, engine: Engine, github: FakeGitHub, postgres_cluster: PostgresCluster,  # noqa: F811
        tmp_path: Path) -> None:
    """`pg_ctl stop -m fast` while jobs run (open connections are cut), deliveries during the gap, `start`,
    then a plain `pg_ctl restart -m fast` while the queue is still draining."""
    app = app_settings_for(settings, github, tmp_path, database_url=_new_database(postgres_cluster.url),
                           write_interval_s=0.05, max_attempts=8, ack_timeout_s=1.0)
    missed: list[dict[str, Any]] = []
    github.redeliver = missed.append
    with running_service(app, engine) as client:
        state = state_of(client)
        queue_then_wait(client, github, QUEUED, comments=5)
        postgres_cluster.ctl("-m", "fast", "stop")
        try:
            assert refused_while_down(client, github, DURING) == len(DURING)
            assert client.get("/healthz/ready").status_code == 503
            assert state.worker_alive()
        finally:
            postgres_cluster.ctl("start")
        wait_until(lambda: client.get("/healthz/ready").status_code == 200)
        postgres_cluster.ctl("-m", "fast", "restart")
        assert sum(bot_comment_counts(github, QUEUED).values()) < len(QUEUED), "the restart came mid-queue"
        recover_refused(client, state, missed)
        counts = wait_idle(client, timeout=120)
        assert state.worker_alive()
    assert counts == {"done": len(QUEUED) + len(DURING)}
    assert bot_comment_counts(github, QUEUED + DURING) == dict.fromkeys(QUEUED + DURING, 1)


class Disk(Protocol):
    """A way to make the database's disk full and to free it again, for one running service."""

    def fill(self, state: ServiceState) -> None: ...

    def free(self, state: ServiceState) -> None: ...


class PageLimit:
    """SQLite's own view of a full disk: `PRAGMA max_page_count` at the current page count fails every write
    that needs a new page with SQLITE_FULL ("database or disk is full"). Per connection: set on every
    connection the service holds. Raising it again frees the disk."""

    limit = 0

    def fill(self, state: ServiceState) -> None:
        [(pages,)], [(self.limit,)] = state.store.pragma("page_count"), state.store.pragma("max_page_count")
        state.sqlite_pragma(f"max_page_count = {pages}")

    def free(self, state: ServiceState) -> None:
        state.sqlite_pragma(f"max_page_count = {self.limit}")


class FilledTmpfs:
    """A real tiny tmpfs holding the database, filled to the last byte by a file (ENOSPC), then freed by
    deleting it. Needs root to mount (the `tmpfs` fixture; CI runs as root and fails without it)."""

    def __init__(self, mount: Path) -> None:
        self.filler = mount / "filler"

    def fill(self, state: ServiceState) -> None:
        chunk = b"\0" * 65536
        with self.filler.open("wb", buffering=0) as out:
            try:
                while True:
                    out.write(chunk)
            except OSError:
                pass
            try:
                while True:
                    out.write(b"\0")
            except OSError:
                pass

    def free(self, state: ServiceState) -> None:
        self.filler.unlink()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs for the database. Where this process may not mount one: skipped (the max_page_count test
    covers a full disk everywhere), or a failure in CI (tests/services.py), which runs as root."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0:
        missing_service("mounting the tmpfs of this test needs root", "run the tests as root (CI does)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        missing_service(f"`mount -t tmpfs` failed as root: {mounted.stderr.strip()}",
                        "run the tests where root may mount (a container needs CAP_SYS_ADMIN, e.g. --privileged)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True, capture_output=True)


def disk_full_errors(caplog: pytest.LogCaptureFixture) -> int:
    """How many log records (their message or traceback) tell of SQLite's full disk."""
    return sum("database or disk is full" in caplog.handler.format(record) for record in list(caplog.records))


def full_disk_then_freed(app: Settings, engine: Engine, github: FakeGitHub, disk: Disk,
                         caplog: pytest.LogCaptureFixture) -> None:
    """While full: deliveries 503 + Retry-After within the ack bound (or stored), /healthz/ready not ready,
    the worker alive and no job given up. Freed: ready again, and once the refused deliveries come back
    through the recovery sweep, exactly one comment per issue."""
    app = app.model_copy(update={"write_interval_s": 0.05, "ack_timeout_s": 1.0})
    queued = QUEUED[:10]
    missed: list[dict[str, Any]] = []
    github.redeliver = missed.append
    with running_service(app, engine) as client:
        state = state_of(client)
        queue_then_wait(client, github, queued, comments=2)
        disk.fill(state)
        refused = refused_while_down(client, github, DURING)
        assert refused > 0, "the full disk refused deliveries"
        assert client.get("/healthz/ready").status_code == 503
        details = client.get("/healthz/details")  # the reason, behind the ops token
        assert details.status_code == 503 and "full" in details.json()["error"]
        # The worker meets it (a job or its loop), and keeps meeting it.
        wait_until(lambda: disk_full_errors(caplog) >= 3)
        assert state.worker_alive()
        assert "failed" not in state.store.job_counts(), "no job is given up while the disk is full"
        disk.free(state)
        assert client.get("/healthz/ready").status_code == 200
        recover_refused(client, state, missed)
        assert len(missed) == refused
        counts = wait_idle(client)
        assert state.worker_alive()
    assert counts == {"done": len(queued) + len(DURING)}
    assert bot_comment_counts(github, queued + DURING) == dict.fromkeys(queued + DURING, 1)


def test_a_full_database_gets_503_and_not_ready_then_once_freed_every_issue_ends_in_one_comment(
        app_settings: Settings, engine: Engine, github: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    full_disk_then_freed(app_settings, engine, github, PageLimit(), caplog)


def test_a_real_full_tmpfs_gets_503_and_not_ready_then_once_freed_every_issue_ends_in_one_comment(
        app_settings: Settings, engine: Engine, github: FakeGitHub, tmpfs: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    app = app_settings.model_copy(update={"database_url": SecretStr(f"sqlite:///{tmpfs / 'service.sqlite3'}")})
    full_disk_then_freed(app, engine, github, FilledTmpfs(tmpfs), caplog)
