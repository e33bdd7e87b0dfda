"""Running one stored job: its delivery parsed again, GitHub as its installation, its handler."""

from __future__ import annotations

import json

from bot.memory import events as memory_events
from bot.service import commands, triage_job
from bot.service.errors import PermanentGitHubError
from bot.service.events import Job
from bot.service.github import parse_event
from bot.service.router import JobContext, Router
from bot.service.state import ServiceState

ROUTER = Router(triage_job.router, commands.router, memory_events.router)


def execute_job(state: ServiceState, job: Job, router: Router = ROUTER) -> str:
    """Do the job's work (safe to repeat: the comment is found again by its marker); returns the outcome."""
    event = parse_event(job.event, json.loads(state.store.delivery_payload(job.delivery_id)))
    client = None
    if state.github is not None:
        if event.installation_id is None:
            raise PermanentGitHubError("the delivery names no installation; is it from the GitHub App?")
        client = state.github.installation(event.installation_id)
    engine = state.engine.engine
    if engine is None:
        raise RuntimeError("the engine is not loaded")
    return router.dispatch(JobContext(state=state, engine=engine, client=client, delivery_id=job.delivery_id),
                           event)
