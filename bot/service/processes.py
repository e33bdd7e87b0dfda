"""The deployed topology: `ddl-triage serve` (a web process that supervises its worker processes,
`supervisor.py`) and `ddl-triage worker` (a process that loads the engine and runs jobs from the shared database
until stopped)."""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

import uvicorn

from bot.core.settings import Settings
from bot.deciding.shadow import check_exposure
from bot.service.logs import configure_logging
from bot.service.metrics_files import join_shared_metrics
from bot.service.queue.upkeep import worker_beat
from bot.service.queue.worker import Worker
from bot.service.state import (
    Role,
    ServiceOptions,
    ServiceState,
    build_state,
    check_reading_model,
    connect_github,
    open_store,
)
from bot.service.supervisor import ERROR, READY, Supervisor
from bot.service.web.app import create_app

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Supervised:
    """How `serve` started this worker (`ddl-triage worker --report-fd ...`); absent when run by hand."""

    report_fd: int
    parent: int
    niceness: int


def run_worker_process(settings: Settings, supervised: Supervised | None = None) -> None:
    """Run one worker in this process's main thread; SIGTERM or SIGINT stops it after the current job. Under
    `serve` it reports `ready` (or its start-up error) to the supervisor, and dies with it."""
    if supervised is not None:
        _follow_parent(supervised)
    configure_logging(settings=settings)
    join_shared_metrics()
    try:
        state = build_state(settings, Role.WORKER)
    except Exception as exc:
        _report(supervised, f"{ERROR} {exc or type(exc).__name__}")
        raise
    try:
        worker = Worker(state)

        def stop(signum: int, frame: FrameType | None) -> None:
            log.info("worker stopping (signal %d)", signum)
            worker.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        with beating(state, worker.worker_id):
            cases = len(state.engine.engine.index) if state.engine.engine else 0
            log.info("ddl-triage worker started", extra={"shadow": state.shadow, "cases": cases})
            _report(supervised, READY)
            worker.run()
    finally:
        state.close()


@contextmanager
def beating(state: ServiceState, worker_id: str) -> Iterator[None]:
    """While the block runs, say this process is alive every third of a lease from a thread of its own, whatever
    its job does (a long sync slice or an erasure included): the web's readiness counts the workers that beat."""
    stopped = threading.Event()

    def beat() -> None:
        while True:
            try:
                worker_beat(state.store, worker_id, state.engine.engine is not None)
            except Exception as exc:  # the database is down: the next beat may succeed
                log.warning("worker beat failed: %s", exc)
            if stopped.wait(state.settings.job_lease_s / 3):
                return

    thread = threading.Thread(target=beat, name="ddl-triage-beat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join()


def _report(supervised: Supervised | None, line: str) -> None:
    if supervised is None:
        return
    try:
        os.write(supervised.report_fd, (" ".join(line.split()) + "\n").encode())
    except OSError as exc:  # the supervisor is gone: PR_SET_PDEATHSIG stops this process too
        log.warning("could not report %r to serve: %s", line.split()[0], exc)


def _follow_parent(supervised: Supervised) -> None:
    """SIGTERM when `serve` dies, even by kill -9, so no worker is orphaned (Linux); then the lower CPU priority
    `serve` asked for, so that on a busy machine the acknowledgements come before the triage."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != supervised.parent:  # it died before the line above
            raise SystemExit(1)
    os.nice(supervised.niceness)


def run_server(settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """`ddl-triage serve`: check the configuration (clean errors before anything starts), start `workers` worker
    processes and wait until each is ready (triage never runs in the web process; one that cannot start stops
    `serve` with its error, before anything listens), then run uvicorn until stopped, restarting dead workers."""
    configure_logging(settings=settings)
    check_exposure(settings, host)
    check_reading_model(settings)
    app_client = connect_github(settings)
    open_store(settings).close()
    # The workers read the same settings from the environment; the command line's choices are added to it.
    env = os.environ | {"DDL_TRIAGE_SHADOW": "1" if settings.shadow else "0"}
    if settings.data_dir is not None:
        env["DDL_TRIAGE_DATA_DIR"] = str(settings.data_dir)
    supervisor = Supervisor(workers, env, settings.worker_niceness)
    supervisor.start()
    app = create_app(settings, github=lambda _settings: app_client,
                     options=ServiceOptions(run_worker=False, freeze_heap=True), supervisor=supervisor)
    extra = {"loop": "uvloop"} if importlib.util.find_spec("uvloop") else {}
    if importlib.util.find_spec("httptools"):
        extra["http"] = "httptools"
    try:
        # No access log: the webhook logs each delivery once, with its id; a line per request costs the ack.
        uvicorn.run(app, host=host, port=port, log_config=None, proxy_headers=True, access_log=False,
                    **extra)  # type: ignore[arg-type]
    finally:
        supervisor.stop()
