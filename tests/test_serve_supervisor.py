"""`serve --workers 2` keeps its promise (issue 23): a worker killed with SIGKILL is started again and the next
delivery is commented; a worker that cannot start, or a bad DDL_TRIAGE_LLM, stops `serve` with the error before
it listens; one repository answering 410 stops nothing of its installation's history sync."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.memory.store import MemoryStore
from tests.fake_github import REPO, FakeGitHub, github_holding, issue_payload
from tests.memory_helpers import installation_payload
from tests.serve_process import STARTUP_S, Served, free_port, paused, serve_environment, serving

BROKEN = "example-org/a-fork-without-issues"
INSTALLATION = 51000001  # the installation of the payloads in tests/payloads
COMES_BACK_S = 30.0  # issue 23: a worker killed comes back within 30 s


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug"]) as fake:
        fake.seed_issues(REPO, 30, seed=1)
        fake.add_repo(BROKEN).issues_disabled = True
        yield fake


def cursors(served: Served) -> dict[str, Any]:
    store = MemoryStore(served.database_url)
    try:
        return {c.repo: c for c in store.cursors()}
    finally:
        store.close()


def test_one_repository_answering_410_stops_nothing_and_a_killed_worker_comes_back_and_comments(
        github: FakeGitHub, tmp_path: Path) -> None:
    with serving(github, tmp_path, workers=2, worker_niceness="0") as served:
        assert served.deliver(installation_payload("created", [BROKEN, REPO], installation=INSTALLATION),
                              "installation").status_code == 202
        served.wait_until(lambda: {r: c.status for r, c in cursors(served).items()} == {BROKEN: "failed", REPO: "done"},
                          timeout=STARTUP_S)
        assert cursors(served)[REPO].synced == 30
        details = served.get("/healthz/details").json()
        assert "410" in details["memory"][BROKEN]["error"] and details["memory"][REPO]["status"] == "done"
        assert [p["restarts"] for p in details["processes"]] == [0, 0]

        first, second = served.worker_pids()
        os.kill(first, signal.SIGKILL)
        killed_at = time.monotonic()
        served.wait_until(lambda: len(served.worker_pids()) == 2 and first not in served.worker_pids(),
                          timeout=COMES_BACK_S)
        assert time.monotonic() - killed_at < COMES_BACK_S
        [new] = [pid for pid in served.worker_pids() if pid != second]
        served.wait_until(lambda: all(p["ready"] for p in served.get("/healthz/details").json()["processes"]),
                          timeout=STARTUP_S)
        processes = served.get("/healthz/details").json()["processes"]
        assert sorted(p["restarts"] for p in processes) == [0, 1]
        assert "killed by SIGKILL" in [p["last_exit"] for p in processes]
        assert f"worker process {first} killed by SIGKILL" in served.tail(200_000)

        with paused(second, served.databases):  # the new worker alone takes the next delivery
            assert served.deliver(issue_payload(github)).status_code == 202
            served.wait_until(lambda: len(github.bot_comments(REPO, 42)) == 1, timeout=STARTUP_S)
        assert new in served.worker_pids()


def start_serve(github: FakeGitHub, tmp_path: Path, **settings: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    web = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), "--workers", "2"],
                           env=serve_environment(github, tmp_path, **settings), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    return web, port


def exits_without_listening(web: subprocess.Popen[str], port: int) -> str:
    """Wait for `serve` to exit (it must, by itself), trying its port all along; its output."""
    deadline = time.monotonic() + STARTUP_S
    while web.poll() is None:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            assert sock.connect_ex(("127.0.0.1", port)) != 0, "serve listened before its workers were ready"
        assert time.monotonic() < deadline, "serve did not stop"
        time.sleep(0.2)
    return web.stdout.read() if web.stdout else ""


def test_serve_with_a_bad_llm_setting_exits_non_zero_before_listening(github: FakeGitHub, tmp_path: Path) -> None:
    web, port = start_serve(github, tmp_path, llm="opnai:gpt-4o-mini")
    output = exits_without_listening(web, port)
    assert web.returncode == 1
    [line] = [line for line in output.splitlines() if line.startswith("ddl-triage: error:")]
    assert "DDL_TRIAGE_LLM='opnai:gpt-4o-mini' is not understood" in line
    assert "worker started" not in output, "found in the web process, before any worker"


def test_serve_whose_worker_cannot_start_exits_non_zero_with_its_error_before_listening(
        github: FakeGitHub, tmp_path: Path) -> None:
    web, port = start_serve(github, tmp_path, predictor="no-such-predictor")
    output = exits_without_listening(web, port)
    assert web.returncode == 1
    # The worker's own line, then serve's (the workers write to the same terminal): serve's names the error.
    [line] = [line for line in output.splitlines() if line.startswith("ddl-triage: error: a worker process")]
    assert "a worker process could not start (exited with status 1)" in line
    assert "unknown predictor 'no-such-predictor'" in line
    assert github.requests == [], "nothing was asked of GitHub"
