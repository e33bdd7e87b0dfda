"""Running one stored job: its delivery parsed again, GitHub as its installation, its handler."""

from __future__ import annotations

import json
import logging

from bot.service.errors import PermanentGitHubError
from bot.service.github.payloads import parse_event
from bot.service.handlers import commands, installation, issue_lifecycle, triage
from bot.service.handlers.context import JobContext
from bot.service.handlers.router import Router
from bot.service.queue.jobs import Job
from bot.service.review import posting
from bot.service.state import ServiceState

log = logging.getLogger(__name__)

ROUTER = Router(triage.router, commands.router, installation.router, issue_lifecycle.router, posting.router)


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
    try:
        return router.dispatch(JobContext(state=state, engine=engine, client=client, delivery_id=job.delivery_id),
                               event)
    except PermanentGitHubError as exc:
        if exc.status != 401 or state.github is None or event.installation_id is None:
            raise
    # 401: the installation's token was refused (revoked, or expired early). Once more with a fresh one; the
    # handlers are safe to repeat (the comment is found by its marker, a sync resumes at its cursor).
    log.warning("job %s: GitHub refused the installation token; retrying once with a fresh one", job.id)
    client = state.github.renew(event.installation_id)
    return router.dispatch(JobContext(state=state, engine=engine, client=client, delivery_id=job.delivery_id),
                           event)
