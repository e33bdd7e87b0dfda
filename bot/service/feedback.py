"""Maintainers' corrections (`/triage axis=value`): validated against the taxonomy, kept as labelled cases."""

from __future__ import annotations

import logging

from bot.domain import AxisPrediction, TriageResult
from bot.service.events import WebhookEvent
from bot.service.store import Store
from bot.settings import AXES
from bot.taxonomy import Taxonomy

log = logging.getLogger(__name__)


def validate_corrections(raw: dict[str, str], taxonomy: Taxonomy) -> tuple[dict[str, str], list[str]]:
    """The corrections that name a known axis and value (aliases resolved), and a problem per other one."""
    valid: dict[str, str] = {}
    problems: list[str] = []
    for axis, value in raw.items():
        if axis not in AXES:
            problems.append(f"unknown axis {axis!r}; the axes are {', '.join(AXES)}")
        elif (canonical := taxonomy.canonical(axis, value)) is None:
            problems.append(f"{value!r} is not a {axis} value of taxonomy {taxonomy.version}")
        else:
            valid[axis] = canonical
    return valid, problems


def record_corrections(store: Store, delivery_id: str, event: WebhookEvent, author: str,
                       corrections: dict[str, str]) -> None:
    """Store each correction with the issue's text, so it is a labelled case from now on."""
    store.save_feedback(delivery_id, event.repo, event.number, author, event.issue.title, event.issue.body,
                        corrections)
    log.info("correction recorded", extra={"repo": event.repo, "number": event.number, "author": author,
                                           "corrections": corrections})


def apply_corrections(result: TriageResult, corrections: dict[str, str]) -> TriageResult:
    """The result with the maintainers' values in place of the predictions they corrected."""
    if not corrections:
        return result
    predictions = dict(result.predictions)
    for axis, value in corrections.items():
        predictions[axis] = AxisPrediction(label=value, confidence=1.0, top=[(value, 1.0)])
    return result.model_copy(update={"predictions": predictions})
