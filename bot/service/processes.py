"""The deployed topology: `ddl-triage serve` (a web process that starts worker processes) and `ddl-triage
worker` (a process that loads the engine and runs jobs from the shared database until stopped)."""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
from functools import partial
from types import FrameType

import uvicorn

from bot.service.logs import configure_logging
from bot.service.metrics_files import forget_process, join_shared_metrics
from bot.service.queue.worker import Worker
from bot.service.state import Role, ServiceOptions, build_state, connect_github, open_store
from bot.service.web.app import create_app
from bot.settings import Settings

log = logging.getLogger(__name__)


def run_worker_process(settings: Settings) -> None:
    """Run one worker in this process's main thread; SIGTERM or SIGINT stops it after the current job."""
    configure_logging(settings=settings)
    join_shared_metrics()
    state = build_state(settings, Role.WORKER)
    try:
        worker = Worker(state)

        def stop(signum: int, frame: FrameType | None) -> None:
            log.info("worker stopping (signal %d)", signum)
            worker.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        cases = len(state.engine.engine.index) if state.engine.engine else 0
        log.info("ddl-triage worker started", extra={"shadow": state.shadow, "cases": cases})
        worker.run()
    finally:
        state.close()


def run_server(settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """`ddl-triage serve`: check the credentials and the database (clean errors before anything starts), start
    `workers` worker processes (triage never runs in the web process), then run uvicorn until stopped."""
    configure_logging(settings=settings)
    app_client = connect_github(settings)
    open_store(settings).close()
    app = create_app(settings, github=lambda _settings: app_client,
                     options=ServiceOptions(run_worker=False, freeze_heap=True))
    # The workers read the same settings from the environment; the command line's choices are added to it.
    env = os.environ | {"DDL_TRIAGE_SHADOW": "1" if settings.shadow else "0"}
    if settings.data_dir is not None:
        env["DDL_TRIAGE_DATA_DIR"] = str(settings.data_dir)
    children = [subprocess.Popen([sys.executable, "-c", "from bot.cli import main; main()", "worker"], env=env,
                                 preexec_fn=partial(_worker_child, settings.worker_niceness)
                                 if sys.platform == "linux" else None)
                for _ in range(workers)]
    extra = {"loop": "uvloop"} if importlib.util.find_spec("uvloop") else {}
    if importlib.util.find_spec("httptools"):
        extra["http"] = "httptools"
    try:
        # No access log: the webhook logs each delivery once, with its id; a line per request costs the ack.
        uvicorn.run(app, host=host, port=port, log_config=None, proxy_headers=True, access_log=False,
                    **extra)  # type: ignore[arg-type]
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            forget_process(child.pid)


def _worker_child(niceness: int) -> None:
    """In a worker child (Linux): SIGTERM when the web process dies, even by kill -9, so none is orphaned;
    and a lower CPU priority, so that on a busy machine the acknowledgements come before the triage."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.nice(niceness)
