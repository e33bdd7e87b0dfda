"""The ops pages: `/metrics`, `/decisions`, `/healthz/details` and the OpenAPI pages (`/docs`, `/redoc`,
`/openapi.json`).

Every route of this router depends on `require_ops_access`: the bearer token `DDL_TRIAGE_OPS_TOKEN`, or, with
no token set, shadow mode and a client on loopback. A router dependency runs on the route that matched, after
the mount's `root_path` and any path prefix are resolved, so no spelling of the path reaches a page without it.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from bot.service.queue.upkeep import ready_workers
from bot.service.repo_errors import config_errors
from bot.service.state import ServiceState
from bot.service.web.health import StateDep, counts, readiness

TOKEN_HINT = "send Authorization: Bearer <DDL_TRIAGE_OPS_TOKEN>"


async def require_ops_access(request: Request) -> None:
    """401 without the bearer token (or, with no token set, outside shadow mode on loopback)."""
    state: ServiceState | None = getattr(request.app.state, "service", None)
    if state is None or not allowed(state, request):
        raise HTTPException(status_code=401, detail=TOKEN_HINT, headers={"WWW-Authenticate": "Bearer"})


def allowed(state: ServiceState, request: Request) -> bool:
    """The bearer token when one is set (an empty DDL_TRIAGE_OPS_TOKEN counts as unset, and an empty bearer
    never matches); with none, shadow mode on loopback."""
    token = state.settings.ops_token.get_secret_value() if state.settings.ops_token else ""
    if token:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        given = given.strip()
        return scheme.lower() == "bearer" and bool(given) and hmac.compare_digest(given.encode(), token.encode())
    host = request.client.host if request.client else ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return state.shadow and loopback


router = APIRouter(dependencies=[Depends(require_ops_access)])


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    """Prometheus text format: every process's series under `serve`; ready once a worker has its engine."""
    jobs = await run_in_threadpool(state.store.job_counts)
    ready = state.engine.engine is not None or await run_in_threadpool(
        ready_workers, state.store, 3 * state.settings.job_lease_s) > 0
    return Response(state.metrics.render(jobs, ready), media_type=state.metrics.content_type)


@router.get("/decisions")
async def decisions(state: StateDep, limit: Annotated[int, Query(ge=1, le=500)] = 50,
                    repo: str | None = None) -> JSONResponse:
    """The latest triage decisions (posted or, in shadow mode, only stored), newest first."""
    found = await run_in_threadpool(state.store.decisions, limit, repo)
    return JSONResponse({"shadow": state.shadow, "decisions": [d.model_dump(mode="json") for d in found]})


@router.get("/healthz/details")
async def health_details(state: StateDep) -> JSONResponse:
    """`/healthz` with what it leaves out: the error behind a failure, the history sync of each repository (a
    failed one with its reason), each repository whose config is unusable (which key, which line), and under
    `serve` each worker process (running, restarts, how the last one ended)."""
    body, error = await readiness(state)
    body |= await counts(state, body) | ({"error": error} if error else {})
    if body.get("database") == "ok":
        cursors = await run_in_threadpool(state.memory.store.cursors)
        body["memory"] = {c.repo: {"status": c.status, "synced": c.synced, "page": c.page}
                          | ({"error": c.error} if c.error else {}) for c in cursors}
        body["config_errors"] = await run_in_threadpool(config_errors, state.store)
    if state.worker_processes is not None:
        body["processes"] = state.worker_processes()
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


@router.get("/openapi.json", include_in_schema=False)
async def openapi(request: Request) -> JSONResponse:
    app: FastAPI = request.app
    return JSONResponse(app.openapi())


@router.get("/docs", include_in_schema=False)
async def swagger(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url=_openapi_url(request), title="ddl-triage")


@router.get("/redoc", include_in_schema=False)
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(openapi_url=_openapi_url(request), title="ddl-triage")


def _openapi_url(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/") + "/openapi.json"
