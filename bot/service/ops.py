"""Operations: `/healthz` (ready once the case base is loaded), `/metrics` and `/decisions`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from bot.service.state import StateDep

router = APIRouter()


@router.get("/healthz")
async def healthz(state: StateDep) -> JSONResponse:
    """200 once the case base is loaded and the worker runs; 503 while loading or when broken."""
    slot = state.engine
    jobs = await run_in_threadpool(state.store.job_counts)
    worker = state.worker_alive()
    body: dict[str, object] = {"shadow": state.shadow, "jobs": jobs,
                               "worker": "running" if worker else "stopped"}
    if slot.error:
        return JSONResponse(body | {"status": "error", "error": slot.error}, status_code=503)
    if slot.engine is None:
        return JSONResponse(body | {"status": "loading"}, status_code=503)
    body |= {"status": "ok" if worker else "degraded", "cases": len(slot.engine.index)}
    if state.memory is not None:  # history sync progress per repository
        cursors = await run_in_threadpool(state.memory.store.cursors)
        body["memory"] = {c.repo: {"status": c.status, "synced": c.synced, "page": c.page} for c in cursors}
    return JSONResponse(body, status_code=200 if worker else 503)


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    """Prometheus text format."""
    state.metrics.ready.set(1 if state.engine.engine is not None else 0)
    counts = await run_in_threadpool(state.store.job_counts)
    return Response(state.metrics.render(counts), media_type=state.metrics.content_type)


@router.get("/decisions")
async def decisions(state: StateDep, limit: Annotated[int, Query(ge=1, le=500)] = 50,
                    repo: str | None = None) -> JSONResponse:
    """The latest triage decisions (posted or, in shadow mode, only stored), newest first."""
    found = await run_in_threadpool(state.store.decisions, limit, repo)
    return JSONResponse({"shadow": state.shadow, "decisions": [d.model_dump(mode="json") for d in found]})
