"""`ddl-triage serve` as it is deployed: a web process and its worker processes, started as the operator
starts them, acting as the App of a test's fake GitHub. For tests of the real topology; the in-process
harness (`fake_github.running_service`) stays the tool for unit tests."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bot.service.queue.store import Store
from tests.fake_github import OPS_TOKEN, SECRET, FakeGitHub, signed_delivery

STARTUP_S = 300.0  # a worker loads the case pack and the embedding model: seconds idle, minutes when busy


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    """The running `serve`: its web process, the address it answers on, its database and its log."""

    web: subprocess.Popen[bytes]
    url: str
    database_url: str
    state_dir: Path
    log: Path

    @property
    def databases(self) -> list[Path]:
        """The SQLite files the processes write: the service database and the embedding cache."""
        return [Path(self.database_url.removeprefix("sqlite:///")), self.state_dir / "cache" / "embeddings.sqlite3"]

    def deliver(self, payload: dict[str, Any], event: str = "issues") -> httpx.Response:
        """POST a signed delivery as GitHub would."""
        body, headers = signed_delivery(payload, event, SECRET)
        return httpx.post(f"{self.url}/webhook", content=body, headers=headers, timeout=30)

    def get(self, path: str, token: str | None = OPS_TOKEN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=30)

    def worker_pids(self) -> list[int]:
        """The worker processes `serve` started (its children, of any of its threads: the supervisor's thread
        starts the workers that replace dead ones)."""
        children = [pid for task in Path(f"/proc/{self.web.pid}/task").iterdir()
                    for pid in _read(task / "children").split()]
        return sorted(int(pid) for pid in children)

    def wait_idle(self, timeout: float = 120.0) -> dict[str, int]:
        """Until no job is queued or running (read from the service database, as an operator could)."""
        store = Store(self.database_url)
        try:
            self.wait_until(lambda: not {"queued", "running"} & set(store.job_counts()), timeout)
            return store.job_counts()
        finally:
            store.close()

    def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.web.poll() is None, f"serve exited ({self.web.returncode}):\n{self.tail()}"
            assert time.monotonic() < deadline, f"timed out waiting; serve's log:\n{self.tail()}"
            time.sleep(0.1)

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def serve_environment(github: FakeGitHub, tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of `serve` acting as the fake's App: a fresh state directory and SQLite database, the
    shipped case pack, short waits (`settings`: more DDL_TRIAGE_ variables, by their lower-case name)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DDL_TRIAGE_", "PROMETHEUS_"))}
    values = {"webhook_secret": SECRET, "github_app_id": str(github.app_id), "github_private_key": github.private_key,
              "github_api_url": github.base_url, "ops_token": OPS_TOKEN, "state_dir": str(tmp_path / "state"),
              "database_url": f"sqlite:///{tmp_path / 'service.sqlite3'}", "write_interval_s": "0",
              "worker_poll_s": "0.05", "memory_page_interval_s": "0"} | settings
    return env | {"HF_HUB_OFFLINE": "1"} | {f"DDL_TRIAGE_{name.upper()}": value for name, value in values.items()}


@contextmanager
def serving(github: FakeGitHub, tmp_path: Path, workers: int = 2, environment: dict[str, str] | None = None,
            **settings: str) -> Iterator[Served]:
    """`ddl-triage serve --workers N` until the block ends, ready: every worker beat with its engine loaded.
    `environment`: more variables (not settings), e.g. PROMETHEUS_MULTIPROC_DIR."""
    env = serve_environment(github, tmp_path, **settings) | (environment or {})
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        web = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), "--workers",
                                str(workers)], env=env, stdout=out, stderr=subprocess.STDOUT)
    served = Served(web, f"http://127.0.0.1:{port}", env["DDL_TRIAGE_DATABASE_URL"], Path(env["DDL_TRIAGE_STATE_DIR"]),
                    log)
    try:
        served.wait_until(lambda: _ready_workers(served) == workers, STARTUP_S)
        yield served
    finally:
        for pid in _alive(served):
            os.kill(pid, signal.SIGCONT)  # a worker a test paused must hear the SIGTERM
        web.terminate()
        try:
            web.wait(timeout=30)
        except subprocess.TimeoutExpired:
            web.kill()
            web.wait()


@contextmanager
def standalone_workers(served: Served, count: int, environment: dict[str, str]) -> Iterator[list[int]]:
    """`ddl-triage worker` processes beside a `serve --workers 0` (the shipped compose.yaml's worker containers),
    until the block ends, ready (the web process counts them); their pids."""
    workers = [subprocess.Popen([sys.executable, "-m", "bot.cli.main", "worker"], env=environment,
                                stdout=(served.state_dir.parent / f"worker-{n}.log").open("ab"),
                                stderr=subprocess.STDOUT) for n in range(count)]
    try:
        served.wait_until(lambda: _ready_workers(served) == count, STARTUP_S)
        yield [worker.pid for worker in workers]
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


@contextmanager
def paused(pid: int, databases: list[Path]) -> Iterator[None]:
    """The process stops running (SIGSTOP) until the block ends, so the other workers take the jobs meanwhile.

    It is stopped only where it holds no write lock on the SQLite `databases` (its transactions are short:
    stopped inside one, it would hold the lock, and every other process's writes with it, until resumed)."""
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        if all(_writable(path) for path in databases):
            break
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)
    else:
        raise AssertionError(f"worker {pid} kept a database locked")
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _writable(path: Path) -> bool:
    """Whether a write transaction can start on the SQLite file now (nobody holds its write lock)."""
    conn = sqlite3.connect(path, timeout=0.5, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # the thread ended meanwhile
        return ""


def _ready_workers(served: Served) -> int:
    try:
        response = served.get("/healthz", token=None)
    except httpx.HTTPError:
        return 0
    return int(response.json().get("workers", 0)) if response.status_code in (200, 503) else 0


def _alive(served: Served) -> list[int]:
    try:
        return served.worker_pids()
    except OSError:
        return []
