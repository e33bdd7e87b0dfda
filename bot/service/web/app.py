"""The app factory: a lifespan that owns the engine, the store, the worker and the GitHub client."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.engine import Engine
from bot.errors import TriageError
from bot.memory.queries import Memory
from bot.service.errors import DeliveryRejected, StoreBusy
from bot.service.github.app import GitHubApp
from bot.service.handlers.feedback import learn_corrections
from bot.service.metrics import Metrics, event_label
from bot.service.queue.pacing import reserve_write
from bot.service.queue.worker import Worker
from bot.service.state import EngineSlot, ServiceOptions, ServiceState, connect_github, open_store
from bot.service.web import ops, webhook
from bot.service.web.intake import Intake
from bot.settings import Settings

log = logging.getLogger(__name__)

INTAKE_CONNECTIONS = 1  # writer threads per web process on PostgreSQL (SQLite serialises writers: one)
GitHubFactory = Callable[[Settings], GitHubApp | None]


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
        if options.freeze_heap:
            gc.collect()
            gc.freeze()
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
