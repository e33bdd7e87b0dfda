"""Maintainers' corrections (`/triage axis=value`): validated against the taxonomy, kept as labelled cases."""

from __future__ import annotations

import logging
import threading
from typing import Any

from bot.domain import Case
from bot.engine import Engine
from bot.links import issue_html_url
from bot.service.github.models import WebhookEvent
from bot.service.queue.store import Store
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


def feedback_cases(rows: list[dict[str, Any]], api_url: str) -> list[Case]:
    """Stored corrections grouped per issue into labelled cases (the latest value per axis wins)."""
    cases: dict[tuple[str, int], Case] = {}
    for row in rows:
        key = (str(row["repo"]), int(row["number"]))
        case = cases.get(key) or Case(id=f"{key[0]}#{key[1]}", title=row["title"] or "", body=row["body"] or "",
                                      repo=key[0], number=key[1], url=issue_html_url(api_url, key[0], key[1]),
                                      source_file="feedback")
        case.labels[str(row["axis"])] = str(row["value"])
        case.title, case.body = row["title"] or "", row["body"] or ""
        cases[key] = case
    return list(cases.values())


class LearnedCorrections:
    """The maintainers' corrections this process's engine has learned, caught up from the database before
    each triage: a correction recorded by any worker (or replica) joins every engine's case base at its next
    triage, not only the engine of the worker that handled the command."""

    def __init__(self, store: Store, api_url: str) -> None:
        self.store = store
        self.api_url = api_url
        self.last_id = 0
        self._lock = threading.Lock()

    def catch_up(self, engine: Engine) -> int:
        """Add the corrections stored since the last catch-up to `engine`'s case base (one indexed query)."""
        with self._lock:
            rows = self.store.feedback_cases(after_id=self.last_id)
            if not rows:
                return 0
            added = engine.add_cases(feedback_cases(rows, self.api_url), private=True)
            self.last_id = max(int(row["id"]) for row in rows)
        log.info("case base caught up with %d maintainer-corrected issue(s)", added)
        return added
