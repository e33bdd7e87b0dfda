"""The review page's reads and writes on the service database: one decision, the ratings (Useful / Not useful,
from the page or a reaction), the latest backtest, the corrections of a repository. Each is one transaction."""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel

from bot.service.decisions.models import Decision
from bot.service.decisions.queries import read_decisions
from bot.service.queue.store import Store

PAGE = "page"  # a rating given on the review page
REACTION = "reaction"  # a +1 / -1 reaction on the bot's comment, read by the reactions job


class Rating(BaseModel):
    """Useful / Not useful counts of one decision."""

    useful: int = 0
    not_useful: int = 0

    @property
    def verdict(self) -> bool | None:
        """Useful on balance (True), not (False), or no rating / a tie (None)."""
        if self.useful == self.not_useful:
            return None
        return self.useful > self.not_useful


def decision(store: Store, delivery_id: str) -> Decision | None:
    """The stored decision, or None where there is none or it cannot be read (a warning names it)."""
    with store.transaction() as run:
        rows = run("SELECT delivery_id, decision, created_at FROM decisions WHERE delivery_id = ?",
                   (delivery_id,)).fetchall()
    return next(iter(read_decisions(rows)), None)


def latest_decisions(store: Store, repo: str, limit: int) -> list[Decision]:
    """A repository's latest decisions, newest first, each with the time it was stored."""
    return store.decisions(limit, repo=repo)


def count_decisions(store: Store, repo: str) -> int:
    with store.transaction() as run:
        return int(run("SELECT COUNT(*) FROM decisions WHERE repo = ?", (repo,)).fetchone()[0])


def replace_decision(store: Store, updated: Decision) -> None:
    """Store a decision's new state (posted from the page), keeping its time in the queue."""
    with store.transaction() as run:
        run("UPDATE decisions SET decision = ? WHERE delivery_id = ?",
            (updated.model_dump_json(), updated.delivery_id))


def reviewed_repos(store: Store) -> list[str]:
    """Every repository with a stored decision, by name."""
    with store.transaction() as run:
        rows = run("SELECT DISTINCT repo FROM decisions ORDER BY repo").fetchall()
    return [str(row[0]) for row in rows]


def rate(store: Store, decided: Decision, author: str, useful: bool, source: str = PAGE) -> None:
    """A person's Useful / Not useful for one decision; a later one of theirs (same source) replaces it."""
    with store.transaction() as run:
        run("INSERT INTO review_ratings (delivery_id, repo, number, author, useful, source, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delivery_id, author, source) "
            "DO UPDATE SET useful = excluded.useful, created_at = excluded.created_at",
            (decided.delivery_id, decided.repo, decided.number, author, int(useful), source, time.time()))


def ratings(store: Store, repo: str) -> dict[str, Rating]:
    """Useful / Not useful counts per decision of a repository (page and reactions together)."""
    with store.transaction() as run:
        rows = run("SELECT delivery_id, useful, COUNT(*) FROM review_ratings WHERE repo = ? "
                   "GROUP BY delivery_id, useful", (repo,)).fetchall()
    found: dict[str, Rating] = {}
    for delivery_id, useful, n in rows:
        rating = found.setdefault(str(delivery_id), Rating())
        if useful:
            rating.useful += int(n)
        else:
            rating.not_useful += int(n)
    return found


def corrections_of(store: Store, repo: str) -> list[dict[str, Any]]:
    """Every correction of a repository (the page's and `/triage`'s alike), oldest first."""
    with store.transaction() as run:
        rows = run("SELECT number, axis, value, author, created_at FROM feedback WHERE repo = ? ORDER BY id",
                   (repo,)).fetchall()
    keys = ("number", "axis", "value", "author", "created_at")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def save_backtest(store: Store, repo: str, summary: dict[str, Any]) -> None:
    """The latest backtest of a repository (`ddl-triage backtest`), for the review page's summary."""
    with store.transaction() as run:
        run("INSERT INTO backtests (repo, created_at, summary) VALUES (?, ?, ?) ON CONFLICT (repo) "
            "DO UPDATE SET created_at = excluded.created_at, summary = excluded.summary",
            (repo, time.time(), json.dumps(summary)))


def latest_backtest(store: Store, repo: str) -> tuple[float, dict[str, Any]] | None:
    with store.transaction() as run:
        row = run("SELECT created_at, summary FROM backtests WHERE repo = ?", (repo,)).fetchone()
    return None if row is None else (float(row[0]), json.loads(row[1]))
