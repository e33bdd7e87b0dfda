"""kill -9 of real `ddl-triage worker` processes mid-job, then a new worker: the job is taken over once its
lease has run out and every issue ends with exactly one comment (the comment is found again by its marker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.core.settings import Settings
from bot.service.queue.store import Store
from tests.fake_github import REPO, FakeGitHub, Hold, deliver, issue_payload, running_service

LEASE_S = 3.0
STARTUP_S = 90.0  # a worker loads the shipped case pack and the embedding model before it claims a job


def worker_env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    """The environment of a worker on the shipped case pack, acting as the fake's App, with a short lease."""
    assert settings.github_private_key is not None and settings.webhook_secret is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDL_TRIAGE_")}
    return env | {
        "HF_HUB_OFFLINE": "1", "DDL_TRIAGE_STATE_DIR": str(tmp_path / "worker-state"),
        "DDL_TRIAGE_DATABASE_URL": settings.sqlite_url, "DDL_TRIAGE_GITHUB_API_URL": settings.github_api_url,
        "DDL_TRIAGE_GITHUB_APP_ID": str(settings.github_app_id),
        "DDL_TRIAGE_GITHUB_PRIVATE_KEY": settings.github_private_key.get_secret_value(),
        "DDL_TRIAGE_WEBHOOK_SECRET": settings.webhook_secret.get_secret_value(),
        "DDL_TRIAGE_JOB_LEASE_S": str(LEASE_S), "DDL_TRIAGE_WORKER_POLL_S": "0.05",
        "DDL_TRIAGE_WRITE_INTERVAL_S": "0"}


@contextmanager
def worker_process(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`ddl-triage worker` as its own process; stopped (SIGTERM, then SIGKILL) if the test has not killed it."""
    with log.open("ab") as out:
        child = subprocess.Popen([sys.executable, "-c", "from bot.cli.main import main; main()", "worker"], env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def kill_while_held(child: subprocess.Popen[bytes], hold: Hold, log: Path) -> None:
    """Wait until the worker is inside the held request, then kill -9 it."""
    deadline = time.monotonic() + STARTUP_S
    try:
        while not hold.arrived.wait(0.2):
            assert child.poll() is None, f"the worker exited early:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the worker never reached the held request:\n{log.read_text()[-3000:]}"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        hold.release(drop=True)  # the dead worker's request: dropped if not yet answered (it had no effect)


def test_kill_9_mid_job_and_after_the_comment_then_a_new_worker_leaves_one_comment_per_issue(
        app_settings: Settings, github: FakeGitHub, tmp_path: Path) -> None:
    comments = f"/repos/{REPO}/issues/{{}}/comments"
    before = github.hold("POST", comments.format(42))  # the first worker dies before its comment exists
    after = github.hold("POST", comments.format(43), after=True)  # the second one right after writing it
    env, log = worker_env(app_settings, tmp_path), tmp_path / "workers.log"
    with running_service(app_settings, None, run_worker=False) as client:  # the web process: intake only
        for number in (42, 43, 44):
            assert deliver(client, issue_payload(github, number=number)).status_code == 202
    store = Store(app_settings.sqlite_url)
    try:
        with worker_process(env, log) as first:
            kill_while_held(first, before, log)
        killed = store.job(1)
        assert killed.status == "running" and killed.attempts == 1, "the dead worker's lease still holds it"
        assert github.bot_comments(REPO, 42) == []

        with worker_process(env, log) as second:
            kill_while_held(second, after, log)
        assert len(github.bot_comments(REPO, 43)) == 1, "written before the kill"
        assert store.job(2).status == "running"

        with worker_process(env, log):
            deadline = time.monotonic() + STARTUP_S
            while set(store.job_counts()) != {"done"}:
                assert time.monotonic() < deadline, f"jobs left: {store.job_counts()}\n{log.read_text()[-3000:]}"
                time.sleep(0.2)
        jobs = [store.job(i) for i in (1, 2, 3)]
    finally:
        store.close()
    assert {n: len(github.bot_comments(REPO, n)) for n in (42, 43, 44)} == {42: 1, 43: 1, 44: 1}
    assert jobs[0].attempts >= 2 and jobs[1].attempts >= 2, "each killed job was run again"
    assert "whose worker's lease ran out are queued again" in log.read_text(), "taken over after its lease"
