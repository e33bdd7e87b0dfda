"""Erasing what the service database holds of uninstalled repositories: the decisions and the maintainers'
corrections (issue title, body, author) about them, and every stored delivery that names them with its job
(payloads of failed jobs included). The memory erases its own tables (`Memory.forget_repo`)."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from bot.service.queue.store import Store

# The payload fields that name the repositories a delivery is about.
REPO_LISTS = ("repositories", "repositories_added", "repositories_removed")


def erase_repositories(store: Store, repos: Collection[str], current_delivery: str,
                       installation_id: int | None = None) -> dict[str, int]:
    """Delete every row of `repos` from the service database, in one transaction; counts of what went.

    A delivery naming any of them goes with its job unless that job is running (another worker holds it: its
    job fails or ends, and retention takes it) or still queued for another repository too (a history sync
    that goes on elsewhere). `current_delivery`, the uninstall's own, is kept for its job's bookkeeping with
    a payload that names no repository. With `installation_id` (the whole installation is gone), its write
    pacing row goes too.
    """
    wanted = set(repos)
    with store.transaction() as run:
        decisions = sum(int(run("DELETE FROM decisions WHERE repo = ?", (repo,)).rowcount) for repo in wanted)
        feedback = sum(int(run("DELETE FROM feedback WHERE repo = ?", (repo,)).rowcount) for repo in wanted)
        # The review page's rows of those repositories.
        for table in ("review_ratings", "reaction_reads", "backtests", "comment_html"):
            for repo in wanted:
                run(f"DELETE FROM {table} WHERE repo = ?", (repo,))
        doomed = [delivery for delivery, payload, status in _candidates(run, wanted)
                  if delivery != current_delivery and _erasable(payload, status, wanted)]
        for delivery in doomed:
            run("DELETE FROM jobs WHERE delivery_id = ?", (delivery,))
            run("DELETE FROM deliveries WHERE id = ?", (delivery,))
        scrub_payload(run, current_delivery)
        if installation_id is not None:
            run("DELETE FROM write_pacing WHERE installation_id = ?", (installation_id,))
    return {"decisions": decisions, "feedback": feedback, "deliveries": len(doomed)}


def forget_payload(store: Store, delivery_id: str) -> None:
    """The stored delivery keeps no repository and no text (a job of a repository that turned the bot off)."""
    with store.transaction() as run:
        scrub_payload(run, delivery_id)


def scrub_payload(run: Any, delivery_id: str) -> None:
    """Keep only what parsing the delivery again needs (action, installation, sender): no repository, no text."""
    row = run("SELECT payload FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
    if row is None:
        return
    payload = json.loads(row[0])
    sender = payload.get("sender") or {}
    kept = {"action": payload.get("action", ""), "installation": payload.get("installation"),
            "sender": {"login": sender.get("login", ""), "type": sender.get("type", "User")}}
    run("UPDATE deliveries SET payload = ? WHERE id = ?", (json.dumps(kept), delivery_id))


def _candidates(run: Any, repos: set[str]) -> list[tuple[str, str, str | None]]:
    """(delivery id, payload, its job's status) of every delivery whose id, payload or job names a repository
    of `repos` as text: a prefilter; `_names` reads the payload to tell."""
    found: dict[str, tuple[str, str, str | None]] = {}
    for repo in repos:
        like = f"%{repo}%"
        for delivery, payload, status in run(
                "SELECT d.id, d.payload, j.status FROM deliveries d LEFT JOIN jobs j ON j.delivery_id = d.id "
                "WHERE d.id LIKE ? OR d.payload LIKE ? OR j.issue_key LIKE ?", (like, like, like)).fetchall():
            found[str(delivery)] = (str(delivery), str(payload), status)
    return list(found.values())


def _erasable(payload: str, status: str | None, repos: set[str]) -> bool:
    named = _names(payload)
    if not named & repos or status == "running":
        return False
    return status != "queued" or named <= repos


def _names(payload: str) -> set[str]:
    """The repositories a delivery is about: its repository, an installation's lists, a transfer's target."""
    try:
        data = json.loads(payload)
    except ValueError:
        return set()
    if not isinstance(data, dict):
        return set()
    names = {_full_name(data.get("repository"))}
    for key in REPO_LISTS:
        names |= {_full_name(item) for item in data.get(key) or [] if isinstance(data.get(key), list)}
    changes = data.get("changes")
    if isinstance(changes, dict):
        names.add(_full_name(changes.get("new_repository")))
    return names - {""}


def _full_name(value: object) -> str:
    return str(value.get("full_name") or "") if isinstance(value, dict) else ""
