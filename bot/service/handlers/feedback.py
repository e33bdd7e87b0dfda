"""Maintainers' corrections (`/triage axis=value`): validated against the taxonomy, kept as labelled cases."""

from __future__ import annotations

import logging
import threading
from typing import Any

from bot.comment.links import issue_html_url
from bot.core.domain import Case
from bot.core.settings import AXES
from bot.core.storage.erasures import erasures_after, repo_key
from bot.knowledge.taxonomy import Taxonomy
from bot.models.engine import Engine
from bot.service.github.models import WebhookEvent
from bot.service.queue.store import Store

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
                       corrections: dict[str, str], started_at: float | None = None) -> None:
    """Store each correction with the issue's text, so it is a labelled case from now on (not when the
    repository or the issue was erased since the job `started_at`)."""
    store.save_feedback(delivery_id, event.repo, event.number, author, event.issue.title, event.issue.body,
                        corrections, unless_erased_since=started_at)
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
        self.last_erasure = 0
        self._lock = threading.Lock()

    def catch_up(self, engine: Engine) -> int:
        """Drop from `engine`'s case base the corrections erased since the last catch-up (an uninstall, a
        deleted issue, retention), then add those stored since (two indexed queries)."""
        with self._lock:
            self._forget_erased(engine)
            rows = self.store.feedback_cases(after_id=self.last_id)
            if not rows:
                return 0
            added = engine.add_cases(feedback_cases(rows, self.api_url), private=True)
            self.last_id = max(int(row["id"]) for row in rows)
        log.info("case base caught up with %d maintainer-corrected issue(s)", added)
        return added

    def _forget_erased(self, engine: Engine) -> None:
        with self.store.transaction() as run:
            erased = erasures_after(run, self.last_erasure)
        if not erased:
            return
        whole = {key for _, key, number in erased if number is None}
        issues = {(key, number) for _, key, number in erased if number is not None}
        doomed = [cid for cid, repo in engine.private_cases.items()
                  if repo_key(repo) in whole or (repo_key(repo), _number(cid)) in issues]
        removed = forget_cases(engine, doomed)
        self.last_erasure = erased[-1][0]
        if removed:
            log.info("case base: %d erased correction(s) forgotten", removed)


def forget_cases(engine: Engine, ids: list[str]) -> int:
    """Take private cases (maintainers' corrections that were erased) out of the engine's case base at once.
    Only private cases go: they were appended after the pack's, so no other case changes its row."""
    gone = {cid for cid in ids if cid in engine.private_cases}
    if not gone:
        return 0
    training, index = engine.training, engine.training.index
    keep = [i for i, case in enumerate(index.cases) if case.id not in gone]
    index.cases[:] = [index.cases[i] for i in keep]
    index.vectors = index.vectors[keep]
    index.digests[:] = [index.digests[i] for i in keep]
    training.texts[:] = [training.texts[i] for i in keep]
    for targets in training.targets.values():
        targets[:] = [targets[i] for i in keep]
    index.forget_lookup()
    for cid in gone:
        del engine.private_cases[cid]
    return len(gone)


def _number(case_id: str) -> int | None:
    number = case_id.rpartition("#")[2]
    return int(number) if number.isdigit() else None
