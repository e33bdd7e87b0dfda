"""bot.deciding.decision, bot.models.policy and bot.deciding.shadow: thresholds and abstention, corrections, shadow
mode and the comment-or-not choice, each decided in one place."""

from __future__ import annotations

from pydantic import SecretStr

from bot.core.domain import Issue
from bot.core.settings import AXES, Settings
from bot.deciding.decision import plan_response
from bot.deciding.repo_config import LabelConfig, RepoConfig
from bot.deciding.shadow import repository_shadow, service_shadow, unsigned_deliveries_allowed
from bot.memory.overrides import LabelledExample, blend
from bot.models.engine import Engine
from bot.models.policy import apply_thresholds

ISSUE = Issue(title="NCCL watchdog timeout during allreduce on 16 GPUs",
              body="Training hangs after 30 minutes; the watchdog reports a collective timeout.")
BARE = Issue(id="bare", title="DeepSpeed training hangs with NCCL timeout", body="It does not work.")


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


def test_a_bare_report_stays_without_labels_under_any_repository_threshold(engine: Engine) -> None:
    result = engine.triage(BARE)
    assert result.needs_details and all(result.label(a) is None for a in AXES)
    assert all(result.predictions[a].top for a in AXES), "the ranking is there to pick from"
    loose = RepoConfig(thresholds=dict.fromkeys(AXES, 0.0), labels=LabelConfig(enabled=True))
    plan = plan_response(result, loose, {}, service_shadow=False, can_post=True)
    assert all(plan.result.label(a) is None for a in AXES) and plan.labels == []
    assert all(apply_thresholds(result, {a: 0.0}).label(a) is None for a in AXES)
    # The same report with enough text to triage: the loose thresholds do show the ranking's head.
    full = result.model_copy(update={"needs_details": False})
    assert all(apply_thresholds(full, {a: 0.0}).label(a) == full.predictions[a].top[0][0] for a in AXES)


def test_the_correction_blend_does_not_label_a_bare_report(engine: Engine) -> None:
    result = engine.triage(BARE)
    copies = [LabelledExample(axis, result.predictions[axis].top[0][0], 1.0, "correction") for axis in AXES]
    blended = blend(engine, result, copies)
    assert blended.needs_details and all(blended.label(a) is None for a in AXES)
    assert all(blended.predictions[a].confidence >= result.predictions[a].confidence for a in AXES)
    shown = blend(engine, result.model_copy(update={"needs_details": False}), copies)
    sure = [c for c in copies if shown.predictions[c.axis].confidence >= engine.settings.threshold(c.axis)]
    assert sure and all(shown.label(c.axis) == c.value for c in sure), "an exact copy decides, given details"


def test_shadow_mode_and_unsigned_deliveries_are_decided_in_one_place(settings: Settings) -> None:
    asked = settings.model_copy(update={"shadow": True, "webhook_secret": None, "github_app_id": None,
                                        "github_private_key": None})
    assert service_shadow(asked, can_post=True) and service_shadow(settings, can_post=False)
    assert not service_shadow(settings.model_copy(update={"shadow": False}), can_post=True)
    assert repository_shadow(False, RepoConfig(shadow=True)) and not repository_shadow(False, RepoConfig())
    assert unsigned_deliveries_allowed(asked)
    assert not unsigned_deliveries_allowed(asked.model_copy(update={"github_app_id": 1}))
    assert not unsigned_deliveries_allowed(asked.model_copy(update={"github_private_key": SecretStr("k")}))
    assert not unsigned_deliveries_allowed(asked.model_copy(update={"shadow": False}))
