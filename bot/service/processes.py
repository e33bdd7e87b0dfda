"""The deployed topology: `ddl-triage serve` (a web process that starts worker processes) and `ddl-triage
worker` (a process that loads the engine and runs jobs from the shared database until stopped)."""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
from types import FrameType

import uvicorn

from bot.domain import Issue
from bot.engine import build_engine
from bot.service.handlers.feedback import learn_corrections
from bot.service.logs import configure_logging
from bot.service.metrics import Metrics
from bot.service.queue.pacing import reserve_write
from bot.service.queue.worker import Worker
from bot.service.state import EngineSlot, ServiceOptions, ServiceState, connect_github, open_store
from bot.service.web.app import create_app
from bot.settings import Settings

log = logging.getLogger(__name__)

WORKER_NICENESS = 19  # triage is background work: acknowledgements and GitHub I/O come first


def run_worker_process(settings: Settings) -> None:
    """Run one worker in this process's main thread; SIGTERM or SIGINT stops it after the current job."""
    configure_logging()
    github = connect_github(settings)
    store = open_store(settings)
    try:
        if github is not None:
            github.pace_with(lambda installation, interval: reserve_write(store, installation, interval))
        engine = build_engine(settings)
        learn_corrections(engine, store, settings.github_api_url)
        engine.triage(Issue(title="warm-up", body="loads the embedding model before this worker says it is ready"))
        state = ServiceState(settings=settings, options=ServiceOptions(), store=store, metrics=Metrics(),
                             engine=EngineSlot(engine), github=github)
        worker = Worker(state)

        def stop(signum: int, frame: FrameType | None) -> None:
            log.info("worker stopping (signal %d)", signum)
            worker.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        log.info("ddl-triage worker started", extra={"shadow": state.shadow, "cases": len(engine.index)})
        worker.run()
    finally:
        store.close()


def run_server(settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """`ddl-triage serve`: check the credentials and the database (clean errors before anything starts), start
    `workers` worker processes (triage never runs in the web process), then run uvicorn until stopped."""
    configure_logging()
    app_client = connect_github(settings)
    open_store(settings).close()
    app = create_app(settings, github=lambda _settings: app_client,
                     options=ServiceOptions(run_worker=False, freeze_heap=True))
    # The workers read the same settings from the environment; the command line's choices are added to it.
    env = os.environ | {"DDL_TRIAGE_SHADOW": "1" if settings.shadow else "0"}
    if settings.data_dir is not None:
        env["DDL_TRIAGE_DATA_DIR"] = str(settings.data_dir)
    children = [subprocess.Popen([sys.executable, "-c", "from bot.cli import main; main()", "worker"], env=env,
                                 preexec_fn=_worker_child if sys.platform == "linux" else None)
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


def _worker_child() -> None:
    """In a worker child (Linux): SIGTERM when the web process dies, even by kill -9, so none is orphaned;
    and a lower CPU priority, so that on a busy machine the acknowledgements come before the triage."""
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.nice(WORKER_NICENESS)
