"""The app factory: a lifespan that owns the engine, the store, the worker and the GitHub client."""

from __future__ import annotations

import importlib.util
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.engine import Engine
from bot.errors import ConfigError, TriageError
from bot.memory.service import Memory
from bot.service import ops, webhook
from bot.service.credentials import AppCredentials, check_credentials
from bot.service.errors import DeliveryRejected, StoreBusy
from bot.service.feedback import learn_corrections
from bot.service.github import GitHubApp
from bot.service.intake import Intake
from bot.service.logs import configure_logging
from bot.service.metrics import Metrics, event_label
from bot.service.state import EngineSlot, ServiceOptions, ServiceState
from bot.service.store import Store
from bot.service.upkeep import reserve_write
from bot.service.worker import Worker
from bot.settings import Settings

log = logging.getLogger(__name__)

INTAKE_CONNECTIONS = 1  # writer threads per web process on PostgreSQL (SQLite serialises writers: one)
WORKER_NICENESS = 10
GitHubFactory = Callable[[Settings], GitHubApp | None]


def connect_github(settings: Settings) -> GitHubApp | None:
    """The App client from the settings (None in shadow mode without credentials); checks them first."""
    credentials = check_credentials(settings)
    return _github_app(credentials, settings) if credentials else None


def _github_app(credentials: AppCredentials, settings: Settings) -> GitHubApp:
    return GitHubApp(credentials, write_interval_s=settings.write_interval_s)


def open_store(settings: Settings, busy_timeout_s: float = 30.0) -> Store:
    """The service database, or a ConfigError that names it and says what to check."""
    try:
        return Store(settings.sqlite_url, busy_timeout_s=busy_timeout_s)
    except sqlite3.Error as exc:
        raise ConfigError(f"DDL_TRIAGE_DATABASE_URL {settings.sqlite_url}: cannot open the database ({exc}); "
                          "check that the file and its directory exist and are writable") from None


def create_app(settings: Settings, *, engine: Engine | None = None, github: GitHubFactory = connect_github,
               options: ServiceOptions | None = None) -> FastAPI:
    """The webhook service; tests inject the session's engine and shorter waits, never a fake predictor."""
    options = options or ServiceOptions()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = github(settings)
        store = open_store(settings)
        # A job left 'running' by a crashed process is queued again once its lease has run out: at once
        # when it already has, else by the worker's sweep (another live process may still hold it).
        requeued = store.requeue_running()
        if requeued:
            log.warning("%d job(s) left unfinished by the last run are queued again", requeued)
        def learn(ready: Engine) -> None:  # maintainers' corrections so far join the case base
            learn_corrections(ready, store, settings.github_api_url)

        slot = EngineSlot(engine)
        if engine is not None:
            learn(engine)
        elif options.run_worker:  # only a process that runs a worker needs the engine
            slot.load_in_background(settings, on_ready=learn)
        # The intake's own connections wait for the database less than the ack's bound, so that a delivery
        # refused with 503 was, as far as timing allows, not stored either (a redelivery is deduplicated anyway).
        intake = Intake([open_store(settings, busy_timeout_s=settings.ack_timeout_s * 0.4)
                         for _ in range(INTAKE_CONNECTIONS if store.postgres else 1)],
                        timeout_s=settings.ack_timeout_s, max_pending=settings.max_pending_deliveries)
        if client is not None:
            client.pace_with(lambda installation, interval: reserve_write(store, installation, interval))
        state = ServiceState(settings=settings, options=options, store=store, metrics=Metrics(), engine=slot,
                             github=client, intake=intake,
                             memory=Memory.open(settings))
        worker = Worker(state)
        state.worker_alive = lambda: worker.alive
        app.state.service = state
        if options.run_worker:
            worker.start()
        log.info("ddl-triage service started", extra={"shadow": state.shadow, "api": settings.github_api_url})
        try:
            yield
        finally:
            worker.stop(options.shutdown_timeout_s)
            store.close()
            intake.close()
            if state.memory is not None:
                state.memory.close()
            log.info("ddl-triage service stopped")

    app = FastAPI(title="ddl-triage", lifespan=lifespan,
                  summary="Triage suggestions for new issues of distributed deep-learning frameworks")
    app.router.routes.append(webhook.route)
    app.include_router(ops.router)
    app.add_middleware(ops.OpsGuard)
    app.add_exception_handler(DeliveryRejected, _rejected)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
    return app


async def _rejected(request: Request, exc: DeliveryRejected) -> JSONResponse:
    """A refused delivery: its status, a log line, a metric; the service carries on."""
    event = event_label(request.headers.get("x-github-event"))
    log.warning("delivery rejected (%d): %s", exc.status, exc,
                extra={"event": event, "delivery": request.headers.get("x-github-delivery")})
    state: ServiceState | None = getattr(request.app.state, "service", None)
    if state is not None:
        state.metrics.deliveries.labels(event=event, outcome=exc.outcome).inc()
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, StoreBusy) else None
    return JSONResponse({"status": "rejected", "error": str(exc)}, status_code=exc.status, headers=headers)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    """The HTTP boundary's catch-all: a 500 and a traceback in the log, never a crash."""
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    message = str(exc) if isinstance(exc, TriageError) else "internal error; see the service log"
    return JSONResponse({"status": "error", "error": message}, status_code=500)


def run_server(settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """`ddl-triage serve`: check the credentials and the database (clean errors before anything starts), start
    `workers` worker processes (triage never runs in the web process), then run uvicorn until stopped."""
    configure_logging()
    app_client = connect_github(settings)
    open_store(settings).close()
    app = create_app(settings, github=lambda _settings: app_client, options=ServiceOptions(run_worker=False))
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
