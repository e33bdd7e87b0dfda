"""One owner per decision: what the bot does with a triage result on one repository.

The repository's thresholds (applied by `bot/models/policy.py`, the one owner of abstention), maintainers'
corrections, shadow mode (as `bot/deciding/shadow.py` decides it) and the choice to comment and label are put together
here, from arguments only; the router dispatches and the triage job carries the plan out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.domain import AxisPrediction, TriageResult
from bot.deciding.repo_config import RepoConfig, label_names
from bot.deciding.shadow import repository_shadow
from bot.models.policy import apply_thresholds


@dataclass(frozen=True)
class Plan:
    """The decision for one issue: the result to show, whether to post it, and the labels to add."""

    result: TriageResult
    shadow: bool
    post: bool
    labels: list[str] = field(default_factory=list)


def plan_response(result: TriageResult, config: RepoConfig, corrections: dict[str, str], *,
                  service_shadow: bool, can_post: bool) -> Plan:
    """The plan for `result`: thresholds, then corrections (a maintainer's word beats any threshold);
    shadow if the service or the repository asks for it; post and label only outside shadow with a client."""
    shown = apply_corrections(apply_thresholds(result, config.thresholds), corrections)
    shadow = repository_shadow(service_shadow, config)
    post = not shadow and can_post
    return Plan(result=shown, shadow=shadow, post=post, labels=label_names(config, shown) if post else [])


def apply_corrections(result: TriageResult, corrections: dict[str, str]) -> TriageResult:
    """The result with the maintainers' values in place of the predictions they corrected."""
    if not corrections:
        return result
    predictions = dict(result.predictions)
    for axis, value in corrections.items():
        predictions[axis] = AxisPrediction(label=value, confidence=1.0, top=[(value, 1.0)], corrected=True)
    return result.model_copy(update={"predictions": predictions})
