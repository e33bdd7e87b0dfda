"""The triage job: read the issue, triage it, and post (or, in shadow mode, store) the one comment, or stay
silent when the repository's comment policy says so (`bot/comment/policy.py`)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace

from pydantic import BaseModel

from bot.comment import compose, silence_reason
from bot.comment.policy import SILENT_FIRST_STEP, SILENT_MEMBER, SILENT_NEVER, SILENT_NOTHING
from bot.deciding.decision import Plan, plan_response
from bot.deciding.repo_config import RepoConfig
from bot.reading.normalise import NormalisedIssue
from bot.service.decisions.models import Decision
from bot.service.errors import WriteDeferred
from bot.service.github.models import IssueSnapshot, PostedComment, WebhookEvent
from bot.service.github.pacing import save_prepared, take_prepared
from bot.service.handlers.config_file import usable_config
from bot.service.handlers.context import JobContext
from bot.service.handlers.issue_lifecycle import remember_from_delivery
from bot.service.handlers.recall import recall
from bot.service.handlers.router import Router
from bot.service.review.html_cache import keep_html

log = logging.getLogger(__name__)

router = Router()

SHADOW = "stored (shadow mode)"
# Each outcome as a label of `ddl_triage_comments_total` (a fixed set).
COMMENT_METRIC = {"comment created": "created", "comment edited": "edited", "comment unchanged": "unchanged",
                  SHADOW: "shadow", SILENT_NOTHING: "silent_nothing_to_add", SILENT_MEMBER: "silent_member",
                  SILENT_NEVER: "silent_never", SILENT_FIRST_STEP: "silent_first_step_only"}


@router.register("issues", "opened", "edited", "reopened")
def handle_issue(ctx: JobContext, event: WebhookEvent) -> str:
    return triage_issue(ctx, event)


class Prepared(BaseModel):
    """A triage computed up to its writes: what a run deferred by write pacing keeps for the next one."""

    decision: Decision  # as it will be stored, less what the writes say (posted, comment id, labels added)
    body: str | None
    silence: str | None
    wanted: list[str]
    present: list[str]
    post: bool


def triage_issue(ctx: JobContext, event: WebhookEvent, *, requested: bool = False) -> str:
    """Triage the issue as it is now and upsert the bot's comment, or stay silent; returns the outcome.

    `requested`: someone with write access asked for it (`/triage`), so an issue of a member is answered too.
    A run deferred by write pacing (its installation's next write slot is booked) left what it computed on
    the job: the next run only writes it.
    """
    kept = take_prepared(ctx.state.store, ctx.delivery_id)
    if kept is not None:
        return _write(ctx, event, Prepared.model_validate_json(kept))
    config = usable_config(ctx, event.repo)
    if isinstance(config, str):  # read first: nothing is stored of a repository that is off or misconfigured
        return config
    remember_from_delivery(ctx, event)
    snapshot = (ctx.client.read_issue(event.repo, event.number) if ctx.client
                else IssueSnapshot.from_event(event))
    if snapshot.is_pull_request:
        return "pull request"
    if snapshot.state != "open":
        return "issue is closed"
    ctx.state.corrections.catch_up(ctx.engine)  # corrections recorded since, by this worker or another
    started = time.perf_counter()
    result, normalised = ctx.engine.read_and_triage(snapshot.issue)  # the issue is read (normalised) once
    ctx.state.metrics.triage_seconds.observe(time.perf_counter() - started)
    recalled = recall(ctx, event.repo, event.number, normalised, result, config)  # before the thresholds
    plan = plan_response(recalled.result, config, ctx.state.store.corrections(event.repo, event.number),
                         service_shadow=ctx.shadow, can_post=ctx.client is not None)
    plan = replace(plan, result=plan.result.model_copy(update={"repo_labels": recalled.repo_labels}))
    body, silence, reasons = _comment(ctx, config, snapshot, event, plan, normalised, requested=requested)
    wanted = plan.labels + ([n for n, _ in recalled.repo_labels] if config.labels.enabled else [])
    prepared = Prepared(decision=_decision(ctx, event, plan, body, (snapshot.issue.title, list(reasons))),
                        body=body, silence=silence, wanted=wanted, present=snapshot.labels, post=plan.post)
    try:
        return _write(ctx, event, prepared)
    except WriteDeferred:
        save_prepared(ctx.state.store, ctx.delivery_id, prepared.model_dump_json())
        raise


def _write(ctx: JobContext, event: WebhookEvent, prepared: Prepared) -> str:
    """The prepared triage's writes (the comment, the labels), then its decision; the outcome."""
    posted, added = _carry_out(ctx, event, prepared.post, prepared.body, prepared.wanted, prepared.present)
    outcome = prepared.silence or _posted_outcome(posted)
    decision = prepared.decision.model_copy(update={
        "posted": posted is not None, "comment_id": posted.id if posted else None, "labels_added": added,
        "outcome": outcome})
    if ctx.state.store.save_decision(decision, unless_erased_since=ctx.started_at):
        keep_html(ctx.state.store, [decision])  # the review page's queue reads it rendered
    ctx.state.metrics.comments.labels(outcome=COMMENT_METRIC[outcome]).inc()
    return outcome


def _carry_out(ctx: JobContext, event: WebhookEvent, post: bool, body: str | None, wanted: list[str],
               present: list[str]) -> tuple[PostedComment | None, list[str]]:
    """Upsert the comment (unless silent) and add the labels the plan allows; nothing in shadow mode.

    The repository's own labels are in `wanted` only where the config enables labels; add_labels skips names
    the repository does not have. Labels do not depend on the comment: a silent triage still adds them.
    """
    if not post or ctx.client is None:
        return None, []
    # Silent: nothing is posted, and a comment this bot left on the issue earlier (an older version, or before
    # an edit) is left as it is: the bot never deletes, and an edit saying "nothing to add" would be noise.
    posted = (ctx.client.upsert_comment(event.repo, event.number, body, posted_comment_id(ctx, event))
              if body is not None else None)
    added = ctx.client.add_labels(event.repo, event.number, wanted, present) if wanted else []
    return posted, added


def posted_comment_id(ctx: JobContext, event: WebhookEvent) -> int | None:
    """The id of the bot's comment on the issue, as the latest decision that posted one stored it."""
    with ctx.state.store.transaction() as run:
        rows = run("SELECT decision FROM decisions WHERE repo = ? AND number = ? ORDER BY created_at DESC LIMIT 20",
                   (event.repo, event.number)).fetchall()
    ids = [json.loads(row[0]).get("comment_id") for row in rows]
    return next((int(i) for i in ids if isinstance(i, int)), None)


def _comment(ctx: JobContext, config: RepoConfig, snapshot: IssueSnapshot, event: WebhookEvent, plan: Plan,
             normalised: NormalisedIssue, *, requested: bool) -> tuple[str | None, str | None, tuple[str, ...]]:
    """The comment's markdown (None: silent), when silent why (a `silent: ...` outcome), and the reasons to
    speak it has (policy.REASONS; empty: nothing that moves the issue forward)."""
    policy = config.comment_policy(ctx.engine.settings)
    if requested:
        policy = policy.model_copy(update={"comment_on_members": True})
    # The API's association is the fresher; the payload's stands in where the API does not say.
    association = snapshot.author_association or event.author_association
    comment_plan, body = compose(snapshot.issue, plan.result, ctx.engine.taxonomy, policy,
                                 author_association=association, chat=ctx.state.chat, normalised=normalised)
    if body is not None:
        return body, None, comment_plan.reasons
    return None, silence_reason(comment_plan.substance, policy, association), comment_plan.reasons


def _posted_outcome(posted: PostedComment | None) -> str:
    if posted is None:
        return SHADOW
    if posted.created:
        return "comment created"
    return "comment edited" if posted.changed else "comment unchanged"


def _decision(ctx: JobContext, event: WebhookEvent, plan: Plan, body: str | None,
              about: tuple[str, list[str]]) -> Decision:
    """The decision, stored whether or not anything was posted (shown at /decisions, kept for audit); what the
    writes say (posted, comment id, labels added, the outcome) is filled in after them. `about`: the issue's
    title and the comment's reasons to speak."""
    result = plan.result
    return Decision(
        delivery_id=ctx.delivery_id, repo=event.repo, number=event.number, event=event.event,
        action=event.action, shadow=plan.shadow, posted=False,
        predictions={axis: p.model_dump() for axis, p in result.predictions.items()},
        neighbours=[{"id": n.id, "url": n.url, "score": round(n.score, 4)} for n in result.neighbours],
        related=[r.model_dump() for r in result.related], repo_labels=result.repo_labels, comment=body,
        title=about[0], reasons=about[1])
