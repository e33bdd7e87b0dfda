"""The app factory: a lifespan that owns the process's state (`build_state`) and, in the tests' harness, the
worker thread."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.core.errors import TriageError
from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.errors import DeliveryRejected, StoreBusy
from bot.service.metrics import event_label
from bot.service.queue.worker import Worker
from bot.service.review import pages as review
from bot.service.state import GitHubFactory, Role, ServiceOptions, ServiceState, build_state, connect_github
from bot.service.supervisor import Supervisor
from bot.service.web import health, ops, webhook

log = logging.getLogger(__name__)


def create_app(settings: Settings, *, engine: Engine | None = None, github: GitHubFactory = connect_github,
               options: ServiceOptions | None = None, supervisor: Supervisor | None = None) -> FastAPI:
    """The webhook service; tests inject the session's engine and shorter waits, never a fake predictor.
    With `options.run_worker` (the tests' harness) this process also runs the worker; `serve` runs it in
    worker processes instead."""
    options = options or ServiceOptions()
    role = Role.WEB_AND_WORKER if options.run_worker else Role.WEB

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = build_state(settings, role, engine=engine, github=github, options=options)
        # A job left 'running' by a crashed process is queued again once its lease has run out: at once
        # when it already has, else by the worker's sweep (another live process may still hold it).
        requeued = state.store.requeue_running()
        if requeued:
            log.warning("%d job(s) left unfinished by the last run are queued again", requeued)
        worker = Worker(state)
        state.worker_alive = lambda: worker.alive
        state.worker_processes = supervisor.status if supervisor is not None else None
        app.state.service = state
        if options.run_worker:
            worker.start()
        if options.freeze_heap:
            gc.collect()
            gc.freeze()
        log.info("ddl-triage service started", extra={"shadow": state.shadow, "api": settings.github_api_url,
                                                      "role": str(role)})
        try:
            yield
        finally:
            worker.stop(options.shutdown_timeout_s)
            state.close()
            log.info("ddl-triage service stopped")

    # FastAPI's own OpenAPI pages are off: the ops router serves them behind its token.
    app = FastAPI(title="ddl-triage", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None,
                  summary="Triage suggestions for new issues of distributed deep-learning frameworks")
    app.router.routes.append(webhook.route)
    app.include_router(health.router)
    app.include_router(ops.router)
    app.include_router(review.router)
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
