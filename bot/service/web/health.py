"""Health: `/healthz/live`, `/healthz/ready` and `/healthz`, open to anyone (a load balancer, an uptime check).

They say ok or not ok, and counts: never a repository's name, never a database's or an engine's error text.
The details (those errors, the history sync per repository) are at `/healthz/details`, behind the ops token
(`ops.py`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from bot.service.queue.upkeep import queue_progress, ready_workers
from bot.service.state import ServiceState

router = APIRouter()


async def _state(request: Request) -> ServiceState:
    # async on purpose: FastAPI runs a plain-def dependency in its thread pool, a thread hop per request.
    state: ServiceState = request.app.state.service
    return state


StateDep = Annotated[ServiceState, Depends(_state)]


@router.get("/healthz/live")
async def live() -> JSONResponse:
    """200 while the process answers (restart it when this fails)."""
    return JSONResponse({"status": "alive"})


@router.get("/healthz/ready")
async def ready(state: StateDep) -> JSONResponse:
    """200 when the database answers in time and an engine is loaded (here, or in a worker process on the
    same database that beats) and the queue moves (no due job waits past DDL_TRIAGE_QUEUE_STALL_S while no job
    runs); 503 otherwise (route no deliveries here)."""
    body, _ = await readiness(state)
    return _answer(body)


@router.get("/healthz")
async def healthz(state: StateDep) -> JSONResponse:
    """The readiness check with counts: jobs by status, cases, history syncs by status."""
    body, _ = await readiness(state)
    return _answer(body | await counts(state, body))


async def readiness(state: ServiceState) -> tuple[dict[str, object], str | None]:
    """The readiness body (ok / not ok and counts), and the error text behind a failure, for the ops pages only."""
    body: dict[str, object] = {"shadow": state.shadow}
    probe = state.intake or state.store  # the intake: the connection the webhook itself depends on
    try:
        await asyncio.wait_for(run_in_threadpool(probe.ping), timeout=state.settings.ack_timeout_s)
        body["database"] = "ok"
    except Exception as exc:
        return body | {"status": "error", "database": "unreachable"}, f"{type(exc).__name__}: {exc}"
    slot = state.engine
    if slot.error:
        return body | {"status": "error", "engine": "failed"}, slot.error
    if state.options.run_worker:  # this process triages: its own engine and worker count
        worker = state.worker_alive()
        body["worker"] = "running" if worker else "stopped"
        if slot.engine is None:
            return body | {"status": "loading"}, None
        return body | {"status": "ok" if worker else "degraded"}, None
    workers, (waited_s, running) = await run_in_threadpool(_workers_and_queue, state)
    body |= {"workers": workers, "queue_wait_s": round(waited_s, 1)}
    if not workers:
        return body | {"status": "loading"}, None
    if waited_s > state.settings.queue_stall_s and not running:  # workers beat, yet nothing is taken
        return body | {"status": "stalled"}, (f"the oldest due job has waited {waited_s:.0f} s and no job runs, "
                                             f"though {workers} worker(s) beat")
    return body | {"status": "ok"}, None


def _workers_and_queue(state: ServiceState) -> tuple[int, tuple[float, int]]:
    """Workers that beat lately (each beats from its own thread, during long jobs too), and the queue's progress."""
    return ready_workers(state.store, 3 * state.settings.job_lease_s), queue_progress(state.store)


async def counts(state: ServiceState, body: dict[str, object]) -> dict[str, object]:
    """Jobs by status, cases in the case base, history syncs by status: numbers only."""
    found: dict[str, object] = {}
    if state.engine.engine is not None:
        found["cases"] = len(state.engine.engine.index)
    if body.get("database") == "ok":
        found["jobs"] = await run_in_threadpool(state.store.job_counts)
        cursors = await run_in_threadpool(state.memory.store.cursors)
        found["memory"] = dict(Counter(c.status for c in cursors))
    return found


def _answer(body: dict[str, object]) -> JSONResponse:
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)
