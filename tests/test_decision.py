"""bot.decision: thresholds, corrections, the one shadow flag and the comment-or-not choice, in one place."""

from __future__ import annotations

from bot.decision import plan_response
from bot.domain import Issue
from bot.engine import Engine
from bot.repo_config import LabelConfig, RepoConfig

ISSUE = Issue(title="NCCL watchdog timeout during allreduce on 16 GPUs",
              body="Training hangs after 30 minutes; the watchdog reports a collective timeout.")


def test_shadow_from_the_service_or_the_repository_means_no_post_and_no_labels(engine: Engine) -> None:
    result = engine.triage(ISSUE)
    labelled = RepoConfig(labels=LabelConfig(enabled=True))
    assert plan_response(result, labelled, {}, service_shadow=False, can_post=True).post
    for plan in (plan_response(result, labelled, {}, service_shadow=True, can_post=True),
                 plan_response(result, labelled.model_copy(update={"shadow": True}), {}, service_shadow=False,
                               can_post=True)):
        assert plan.shadow and not plan.post and plan.labels == []
    assert not plan_response(result, labelled, {}, service_shadow=False, can_post=False).post, "no client, no post"


def test_a_correction_beats_the_repository_threshold(engine: Engine) -> None:
    result = engine.triage(ISSUE)
    strict = RepoConfig(thresholds=dict.fromkeys(("kind", "stage", "symptom", "root_cause", "fix_pattern"), 1.0))
    plan = plan_response(result, strict, {"symptom": "out_of_memory"}, service_shadow=False, can_post=True)
    assert plan.result.predictions["symptom"].label == "out_of_memory"
    assert plan.result.predictions["symptom"].confidence == 1.0
