"""Storing webhook deliveries with their jobs: the SQL of the intake's group commit, on both engines."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# A redelivered id whose job had failed for good is queued again (GitHub's "Redeliver" is the retry).
REQUEUE_FAILED = "UPDATE jobs SET status = 'queued', attempts = 0, next_attempt_at = ?, updated_at = ?"
# Jobs that triage an issue as it is now: a queued one is superseded by a newer one for the same issue, so a
# burst of edits runs one triage of the latest text. The superseded job stays, with this status, for the ops pages.
TRIAGE_EVENT, TRIAGE_ACTIONS = "issues", ("opened", "edited", "reopened")
SUPERSEDED = "superseded"
_SUPERSEDE = (f"UPDATE jobs SET status = '{SUPERSEDED}', updated_at = ?, last_error = {{reason}}, lease_token = NULL "
              f"{{source}}WHERE status = 'queued' AND event = '{TRIAGE_EVENT}' AND action IN "
              f"({', '.join(repr(a) for a in TRIAGE_ACTIONS)}) AND {{match}}")
# What storing a delivery gives: whether it was new, and its job's id (None: a duplicate with nothing to redo).
Recorded = tuple[bool, int | None]


@dataclass(frozen=True)
class NewDelivery:
    """A verified webhook delivery, as the intake stores it."""

    delivery_id: str
    event: str
    action: str
    payload: str
    issue_key: str


def record_deliveries(run: Any, deliveries: Sequence[NewDelivery], postgres: bool) -> list[Recorded]:
    """Each delivery stored once with a queued job, inside the caller's transaction `run`."""
    now = time.time()
    if postgres:
        return _record_set(run, deliveries, now)
    return [_record_row(run, d, now) for d in deliveries]


def _record_row(run: Any, d: NewDelivery, now: float) -> Recorded:
    """One delivery, statement by statement (SQLite: in-process, a statement costs microseconds)."""
    inserted = run("INSERT INTO deliveries (id, event, action, payload, received_at) "
                   "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
                   (d.delivery_id, d.event, d.action, d.payload, now)).fetchone()
    if inserted is None:
        row = run(f"{REQUEUE_FAILED} WHERE delivery_id = ? AND status = 'failed' RETURNING id",
                  (now, now, d.delivery_id)).fetchone()
        return False, row[0] if row else None
    row = run("INSERT INTO jobs (delivery_id, event, action, issue_key, status, next_attempt_at, received_at, "
              "updated_at) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?) RETURNING id",
              (d.delivery_id, d.event, d.action, d.issue_key, now, now, now)).fetchone()
    if coalesces(d):
        run(_SUPERSEDE.format(reason="?", source="", match="issue_key = ? AND id < ?"),
            (now, f"superseded by job {row[0]} (delivery {d.delivery_id})", d.issue_key, row[0]))
    return True, int(row[0])


def coalesces(d: NewDelivery) -> bool:
    """Whether the delivery's job triages its issue afresh (and so supersedes older queued ones)."""
    return d.event == TRIAGE_EVENT and d.action in TRIAGE_ACTIONS


def _record_set(run: Any, deliveries: Sequence[NewDelivery], now: float) -> list[Recorded]:
    """A batch in three statements whatever its size (PostgreSQL: every statement is a round trip).

    The arrays go as binary parameters (`%b`): the text format's quoting scan of each 4 KB payload cost
    more than the rest of the acknowledgement."""
    by_id: dict[str, NewDelivery] = {}
    for d in deliveries:  # an id twice in one batch: stored once, in the order of its first arrival
        by_id.setdefault(d.delivery_id, d)
    first = list(by_id.values())
    columns = [[getattr(d, name) for d in first] for name in ("delivery_id", "event", "action", "payload",
                                                                "issue_key")]
    new = {row[0] for row in run(
        "INSERT INTO deliveries (id, event, action, payload, received_at) SELECT d, e, a, p, ? "
        "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[]) AS t(d, e, a, p) "
        "ON CONFLICT (id) DO NOTHING RETURNING id", (now, *columns[:4])).fetchall()}
    jobs: dict[str, int] = {}
    if new:
        jobs = {row[1]: int(row[0]) for row in run(
            "INSERT INTO jobs (delivery_id, event, action, issue_key, status, next_attempt_at, received_at, "
            "updated_at) SELECT d, e, a, k, 'queued', ?, ?, ? "
            "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[]) WITH ORDINALITY AS t(d, e, a, k, n) "
            "WHERE d = ANY(%b::text[]) ORDER BY n RETURNING id, delivery_id",
            (now, now, now, columns[0], columns[1], columns[2], columns[4], list(new))).fetchall()}
    newest = {d.issue_key: jobs[d.delivery_id] for d in first if d.delivery_id in jobs and coalesces(d)}
    if newest:  # the key's newest job of this batch supersedes its older queued ones, in one statement
        run(_SUPERSEDE.format(reason="'superseded by job ' || n.id", match="issue_key = n.k AND jobs.id < n.id",
                              source="FROM unnest(%b::text[], %b::bigint[]) AS n(k, id) "),
            (now, list(newest), list(newest.values())))
    seen = [d.delivery_id for d in first if d.delivery_id not in new]
    requeued = {row[1]: int(row[0]) for row in run(
        f"{REQUEUE_FAILED} WHERE delivery_id = ANY(%b::text[]) AND status = 'failed' RETURNING id, delivery_id",
        (now, now, seen)).fetchall()} if seen else {}
    results: list[Recorded] = []
    answered: set[str] = set()
    for d in deliveries:
        key = d.delivery_id
        if key in answered:  # the same id twice in one batch: the second is a duplicate
            results.append((False, None))
        elif key in new:
            results.append((True, jobs[key]))
        else:
            results.append((False, requeued.get(key)))
        answered.add(key)
    return results
