"""The triage job: read the issue, triage it, and post (or, in shadow mode, store) the one comment."""

from __future__ import annotations

import logging
import time

from bot.comment import render_comment
from bot.decision import plan_response
from bot.service.github.models import IssueSnapshot, PostedComment, WebhookEvent
from bot.service.handlers.config_file import disabled, load_repo_config
from bot.service.handlers.context import JobContext
from bot.service.handlers.issue_lifecycle import remember_from_delivery
from bot.service.handlers.recall import recall
from bot.service.handlers.router import Router
from bot.service.queue.jobs import Decision

log = logging.getLogger(__name__)

router = Router()


@router.register("issues", "opened", "edited", "reopened")
def handle_issue(ctx: JobContext, event: WebhookEvent) -> str:
    return triage_issue(ctx, event)


def triage_issue(ctx: JobContext, event: WebhookEvent) -> str:
    """Triage the issue as it is now and upsert the bot's comment; returns the outcome."""
    config = load_repo_config(ctx.client, event.repo, ctx.engine.taxonomy)
    if not config.enabled:  # read first: nothing of a repository that turned the bot off is stored
        return disabled(ctx)
    remember_from_delivery(ctx, event)
    snapshot = (ctx.client.read_issue(event.repo, event.number) if ctx.client
                else IssueSnapshot.from_event(event))
    if snapshot.is_pull_request:
        return "pull request"
    if snapshot.state != "open":
        return "issue is closed"
    ctx.state.corrections.catch_up(ctx.engine)  # corrections recorded since, by this worker or another
    started = time.perf_counter()
    result = ctx.engine.triage(snapshot.issue)
    ctx.state.metrics.triage_seconds.observe(time.perf_counter() - started)
    recalled = recall(ctx, event.repo, event.number, snapshot.issue, result, config)  # before the thresholds
    plan = plan_response(recalled.result, config, ctx.state.store.corrections(event.repo, event.number),
                         service_shadow=ctx.shadow, can_post=ctx.client is not None)
    result, shadow = plan.result.model_copy(update={"repo_labels": recalled.repo_labels}), plan.shadow
    body = render_comment(result, ctx.engine.taxonomy, axes=config.axes,
                          similarity_floor=ctx.engine.settings.similarity_floor)
    posted: PostedComment | None = None
    added: list[str] = []
    if plan.post and ctx.client is not None:
        posted = ctx.client.upsert_comment(event.repo, event.number, body)
        # The repository's own labels join only where the config enables labels (add_labels skips unknown ones).
        wanted = plan.labels + ([n for n, _ in recalled.repo_labels] if config.labels.enabled else [])
        if wanted:
            added = ctx.client.add_labels(event.repo, event.number, wanted, snapshot.labels)
    ctx.state.store.save_decision(Decision(
        delivery_id=ctx.delivery_id, repo=event.repo, number=event.number, event=event.event,
        action=event.action, shadow=shadow, posted=posted is not None,
        comment_id=posted.id if posted else None, labels_added=added,
        predictions={axis: p.model_dump() for axis, p in result.predictions.items()},
        neighbours=[{"id": n.id, "url": n.url, "score": round(n.score, 4)} for n in result.neighbours],
        related=[r.model_dump() for r in result.related], repo_labels=recalled.repo_labels,
        comment=body))
    if posted is None:
        return "stored (shadow mode)"
    if posted.created:
        return "comment created"
    return "comment edited" if posted.changed else "comment unchanged"
