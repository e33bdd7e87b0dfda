"""The app factory: a lifespan that owns the engine, the store, the worker and the GitHub client."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.engine import Engine
from bot.errors import TriageError
from bot.memory.service import Memory
from bot.service import ops, webhook
from bot.service.credentials import AppCredentials, check_credentials
from bot.service.errors import DeliveryRejected
from bot.service.feedback import learn_corrections
from bot.service.github import GitHubApp
from bot.service.logs import configure_logging
from bot.service.metrics import Metrics
from bot.service.state import EngineSlot, ServiceOptions, ServiceState
from bot.service.store import Store
from bot.service.worker import Worker
from bot.settings import Settings

log = logging.getLogger(__name__)

GitHubFactory = Callable[[Settings], GitHubApp | None]


def connect_github(settings: Settings) -> GitHubApp | None:
    """The App client from the settings (None in shadow mode without credentials); checks them first."""
    credentials = check_credentials(settings)
    return _github_app(credentials, settings) if credentials else None


def _github_app(credentials: AppCredentials, settings: Settings) -> GitHubApp:
    return GitHubApp(credentials, write_interval_s=settings.write_interval_s)


def create_app(settings: Settings, *, engine: Engine | None = None, github: GitHubFactory = connect_github,
               options: ServiceOptions | None = None) -> FastAPI:
    """The webhook service; tests inject the session's engine and shorter waits, never a fake predictor."""
    options = options or ServiceOptions()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = github(settings)
        store = Store(settings.sqlite_url)
        # One SQLite file has one service, so at start-up every 'running' job is orphaned; on PostgreSQL
        # another replica may be running it, so only stale ones are (and the worker keeps checking).
        requeued = store.requeue_running(settings.stale_job_s if store.postgres else 0.0)
        if requeued:
            log.warning("%d job(s) left unfinished by the last run are queued again", requeued)
        def learn(ready: Engine) -> None:  # maintainers' corrections so far join the case base
            learn_corrections(ready, store, settings.github_api_url)

        slot = EngineSlot(engine)
        if engine is None:
            slot.load_in_background(settings, on_ready=learn)
        else:
            learn(engine)
        state = ServiceState(settings=settings, options=options, store=store, metrics=Metrics(), engine=slot,
                             github=client, memory=Memory.open(settings))
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
            if state.memory is not None:
                state.memory.close()
            log.info("ddl-triage service stopped")

    app = FastAPI(title="ddl-triage", lifespan=lifespan,
                  summary="Triage suggestions for new issues of distributed deep-learning frameworks")
    app.include_router(webhook.router)
    app.include_router(ops.router)
    app.add_exception_handler(DeliveryRejected, _rejected)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
    return app


async def _rejected(request: Request, exc: DeliveryRejected) -> JSONResponse:
    """A refused delivery: its status, a log line, a metric; the service carries on."""
    event = request.headers.get("x-github-event", "") or "-"
    log.warning("delivery rejected (%d): %s", exc.status, exc,
                extra={"event": event, "delivery": request.headers.get("x-github-delivery")})
    state: ServiceState | None = getattr(request.app.state, "service", None)
    if state is not None:
        state.metrics.deliveries.labels(event=event, outcome=exc.outcome).inc()
    return JSONResponse({"status": "rejected", "error": str(exc)}, status_code=exc.status)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    """The HTTP boundary's catch-all: a 500 and a traceback in the log, never a crash."""
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    message = str(exc) if isinstance(exc, TriageError) else "internal error; see the service log"
    return JSONResponse({"status": "error", "error": message}, status_code=500)


def run_server(settings: Settings, host: str, port: int) -> None:
    """`ddl-triage serve`: check the credentials (a clean error before anything starts), then run uvicorn."""
    configure_logging()
    app_client = connect_github(settings)
    app = create_app(settings, github=lambda _settings: app_client)
    uvicorn.run(app, host=host, port=port, log_config=None, proxy_headers=True)
