"""The service database's decisions (one per triage delivery) and maintainers' corrections (`/triage
axis=value`, each a labelled case): their tables and the queries the service's `Store` inherits
(`bot/service/queue/store.py`), kept here so that the queue holds only the queue."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from pydantic import ValidationError

from bot.core.storage.erasures import erased_since
from bot.service.decisions.models import Decision

log = logging.getLogger(__name__)

DECISIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    delivery_id TEXT PRIMARY KEY, repo TEXT NOT NULL, number INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, decision TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS feedback (
    id {serial} PRIMARY KEY, delivery_id TEXT NOT NULL, repo TEXT NOT NULL, number INTEGER NOT NULL,
    axis TEXT NOT NULL, value TEXT NOT NULL, author TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, UNIQUE (delivery_id, axis));
CREATE INDEX IF NOT EXISTS feedback_by_repo ON feedback (repo, id);
CREATE INDEX IF NOT EXISTS feedback_by_age ON feedback (created_at);
CREATE INDEX IF NOT EXISTS decisions_by_repo ON decisions (repo, number);
CREATE INDEX IF NOT EXISTS decisions_by_age ON decisions (created_at);
"""


def read_decisions(rows: Iterable[tuple[Any, Any, Any]]) -> list[Decision]:
    """`(delivery_id, decision JSON, created_at)` rows as decisions, stamped with `created_at`. A row that does not
    parse (an older schema, a hand edit) is left out with a warning that names it: it hides only itself."""
    decisions, unreadable = [], []
    for delivery_id, raw, at in rows:
        try:
            decisions.append(Decision.model_validate_json(raw).model_copy(update={"created_at": float(at)}))
        except ValidationError:
            unreadable.append(str(delivery_id))
    if unreadable:
        log.warning("%d stored decision(s) cannot be read and are left out (delivery %s, ...): check the "
                    "decisions table", len(unreadable), unreadable[0])
    return decisions


class DecisionQueries:
    """Decisions and corrections; the class that mixes this in gives the transactions (`transaction`)."""

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def save_decision(self, decision: Decision, unless_erased_since: float | None = None) -> bool:
        """One decision per delivery; a retried job overwrites its own. Not stored (False) when its repository
        or issue was erased since `unless_erased_since` (the job's start: an uninstall ran meanwhile)."""
        data = decision.model_copy(update={"created_at": time.time()})
        with self.transaction() as run:
            if erased_since(run, data.repo, data.number, unless_erased_since):
                return False
            run("INSERT INTO decisions (delivery_id, repo, number, created_at, decision) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (delivery_id) "
                "DO UPDATE SET created_at = excluded.created_at, decision = excluded.decision",
                (data.delivery_id, data.repo, data.number, data.created_at, data.model_dump_json()))
        return True

    def decisions(self, limit: int = 50, repo: str | None = None) -> list[Decision]:
        """The latest decisions first."""
        where, params = ("WHERE repo = ? ", [repo]) if repo else ("", [])
        with self.transaction() as run:
            rows = run(f"SELECT delivery_id, decision, created_at FROM decisions {where}ORDER BY created_at DESC "
                       "LIMIT ?", (*params, limit)).fetchall()
        return read_decisions(rows)

    def save_feedback(self, delivery_id: str, repo: str, number: int, author: str, title: str, body: str,
                      corrections: dict[str, str], unless_erased_since: float | None = None) -> None:
        """A maintainer's corrections: each one a labelled case (the issue text with the axis value); none
        when the repository or issue was erased since `unless_erased_since`."""
        now = time.time()
        with self.transaction() as run:
            if erased_since(run, repo, number, unless_erased_since):
                return
            for axis, value in corrections.items():
                run("INSERT INTO feedback (delivery_id, repo, number, axis, value, author, title, body, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (delivery_id, axis) DO NOTHING",
                    (delivery_id, repo, number, axis, value, author, title, body, now))

    def corrections(self, repo: str, number: int) -> dict[str, str]:
        """The latest correction per axis for one issue."""
        with self.transaction() as run:
            rows = run("SELECT axis, value FROM feedback WHERE repo = ? AND number = ? "
                       "ORDER BY created_at, id", (repo, number)).fetchall()
        return {str(axis): str(value) for axis, value in rows}

    def feedback_cases(self, after_id: int = 0, repo: str | None = None) -> list[dict[str, Any]]:
        """Every correction (or those stored after `after_id`, or of one repository) as a labelled case,
        oldest first."""
        where, params = ("AND repo = ? ", (repo,)) if repo is not None else ("", ())
        with self.transaction() as run:
            rows = run("SELECT id, repo, number, axis, value, author, title, body FROM feedback WHERE id > ? "
                       f"{where}ORDER BY id", (after_id, *params)).fetchall()
        keys = ("id", "repo", "number", "axis", "value", "author", "title", "body")
        return [dict(zip(keys, row, strict=True)) for row in rows]
