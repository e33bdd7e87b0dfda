"""Operations: `/healthz` (details), `/healthz/live`, `/healthz/ready`, `/metrics` and `/decisions`.

`/metrics`, `/decisions` (text from private repositories) and the OpenAPI pages need the bearer token
`DDL_TRIAGE_OPS_TOKEN`; without one they are open only in shadow mode to a client on loopback.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.service.queue.upkeep import ready_workers
from bot.service.state import ServiceState

router = APIRouter()
GUARDED = ("/metrics", "/decisions", "/docs", "/redoc", "/openapi.json")


async def _state(request: Request) -> ServiceState:
    # async on purpose: FastAPI runs a plain-def dependency in its thread pool, a thread hop per request.
    state: ServiceState = request.app.state.service
    return state


StateDep = Annotated[ServiceState, Depends(_state)]


class OpsGuard:
    """401 for the guarded pages without the bearer token (or, with no token set, outside shadow+loopback).

    A plain ASGI middleware: the webhook passes through untouched (BaseHTTPMiddleware costs every request).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(GUARDED):
            request = Request(scope)
            state: ServiceState | None = getattr(request.app.state, "service", None)
            if state is None or not allowed(state, request):
                refusal = JSONResponse({"status": "unauthorized",
                                        "error": "send Authorization: Bearer <DDL_TRIAGE_OPS_TOKEN>"},
                                       status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def allowed(state: ServiceState, request: Request) -> bool:
    token = state.settings.ops_token
    if token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.get_secret_value().encode())
    host = request.client.host if request.client else ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return state.shadow and loopback


@router.get("/healthz/live")
async def live() -> JSONResponse:
    """200 while the process answers (restart it when this fails)."""
    return JSONResponse({"status": "alive"})


@router.get("/healthz/ready")
async def ready(state: StateDep) -> JSONResponse:
    """200 when the database answers in time and an engine is loaded (here, or in a worker process on the
    same database); 503 otherwise (route no deliveries here)."""
    body = await _readiness(state)
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


@router.get("/healthz")
async def healthz(state: StateDep) -> JSONResponse:
    """The readiness check with details: job counts, the worker, the case base, the history sync."""
    body = await _readiness(state)
    if body.get("database") == "ok":
        body["jobs"] = await run_in_threadpool(state.store.job_counts)
    if state.engine.engine is not None:
        body["cases"] = len(state.engine.engine.index)
    if body.get("database") == "ok":  # history sync progress per repository
        cursors = await run_in_threadpool(state.memory.store.cursors)
        body["memory"] = {c.repo: {"status": c.status, "synced": c.synced, "page": c.page} for c in cursors}
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


async def _readiness(state: ServiceState) -> dict[str, object]:
    body: dict[str, object] = {"shadow": state.shadow}
    probe = state.intake or state.store  # the intake: the connection the webhook itself depends on
    try:
        await asyncio.wait_for(run_in_threadpool(probe.ping), timeout=state.settings.ack_timeout_s)
        body["database"] = "ok"
    except Exception as exc:
        return body | {"status": "error", "database": "unreachable", "error": f"{type(exc).__name__}: {exc}"}
    slot = state.engine
    if slot.error:
        return body | {"status": "error", "error": slot.error}
    if state.options.run_worker:  # this process triages: its own engine and worker count
        worker = state.worker_alive()
        body["worker"] = "running" if worker else "stopped"
        if slot.engine is None:
            return body | {"status": "loading"}
        return body | {"status": "ok" if worker else "degraded"}
    workers = await run_in_threadpool(ready_workers, state.store, 3 * state.settings.job_lease_s)
    body["workers"] = workers
    return body | {"status": "ok" if workers else "loading"}


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    """Prometheus text format: every process's series under `serve`; ready once a worker has its engine."""
    counts = await run_in_threadpool(state.store.job_counts)
    ready = state.engine.engine is not None or await run_in_threadpool(
        ready_workers, state.store, 3 * state.settings.job_lease_s) > 0
    return Response(state.metrics.render(counts, ready), media_type=state.metrics.content_type)


@router.get("/decisions")
async def decisions(state: StateDep, limit: Annotated[int, Query(ge=1, le=500)] = 50,
                    repo: str | None = None) -> JSONResponse:
    """The latest triage decisions (posted or, in shadow mode, only stored), newest first."""
    found = await run_in_threadpool(state.store.decisions, limit, repo)
    return JSONResponse({"shadow": state.shadow, "decisions": [d.model_dump(mode="json") for d in found]})
