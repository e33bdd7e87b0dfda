"""Posting a shadow decision's comment from the review page: a job on the queue, run by a worker through the
same call as a live post (`InstallationClient.upsert_comment`: the comment found by its marker and edited in
place, else created; paced, retried, one job per issue at a time). The job's delivery id is derived from the
decision's, so a second click (or a second maintainer) queues nothing more."""

from __future__ import annotations

import json
import logging

from bot.service.decisions.models import Decision
from bot.service.github.models import WebhookEvent
from bot.service.handlers.config_file import usable_config
from bot.service.handlers.context import JobContext, payload_of
from bot.service.handlers.router import Router
from bot.service.review import records
from bot.service.state import ServiceState

log = logging.getLogger(__name__)

EVENT, ACTION = "ddl_triage_review", "post"
KEY = "ddl_triage_review"  # the payload's field naming the decision and who approved it

router = Router()


def queue_post(state: ServiceState, decided: Decision, by: str) -> bool:
    """Queue the post of `decided`'s comment; False when its delivery is no longer stored (retention)."""
    try:
        payload = json.loads(state.store.delivery_payload(decided.delivery_id))
    except KeyError:
        return False
    payload |= {"action": ACTION, KEY: {"decision": decided.delivery_id, "by": by}}
    new, job_id = state.store.record_delivery(f"review-post-{decided.delivery_id}", EVENT, ACTION,
                                              json.dumps(payload), f"{decided.repo}#{decided.number}")
    log.info("post of a shadow decision queued", extra={"repo": decided.repo, "number": decided.number,
                                                         "by": by, "job": job_id, "new": new})
    state.wake_worker.set()
    return True


@router.register(EVENT, ACTION)
def post_approved(ctx: JobContext, event: WebhookEvent) -> str:
    """Post the stored comment of the approved decision as a live triage would, then mark it posted."""
    review = payload_of(ctx).get(KEY) or {}
    decided = records.decision(ctx.state.store, str(review.get("decision", "")))
    if decided is None or decided.repo != event.repo or decided.number != event.number:
        return "review: the decision is gone"
    if decided.comment is None:
        return "review: nothing to post"
    if ctx.client is None:
        return "review: no App credentials to post with"
    config = usable_config(ctx, event.repo)  # turned off, or unusable, since the triage: nothing is posted
    if isinstance(config, str):
        return config
    posted = ctx.client.upsert_comment(event.repo, event.number, decided.comment)
    outcome = "comment created" if posted.created else "comment edited" if posted.changed else "comment unchanged"
    records.replace_decision(ctx.state.store, decided.model_copy(update={
        "posted": True, "comment_id": posted.id, "outcome": outcome, "approved_by": str(review.get("by") or "")}))
    return f"review: {outcome}"
