"""Missed deliveries: GitHub's documented pattern after downtime. List the App's recent deliveries, and ask
for a redelivery of each one that failed on every attempt and was never recorded here; bounded (a window
and a count per sweep) and idempotent (each GUID is asked for once, across every replica)."""

from __future__ import annotations

import datetime as dt
import logging
import time

from bot.service.github.github_app import GitHubApp, hook_deliveries, redeliver
from bot.service.queue.store import Store

log = logging.getLogger(__name__)

def recover_missed(app: GitHubApp, store: Store, window_s: float = 6 * 3600, limit: int = 50) -> int:
    """Ask for the redelivery of failed, never-recorded deliveries of the last `window_s`; how many."""
    since = time.time() - window_s
    attempts: dict[str, list[dict[str, object]]] = {}
    for item in hook_deliveries(app):
        if _delivered_at(item) >= since and isinstance(item.get("guid"), str):
            attempts.setdefault(str(item["guid"]), []).append(item)
    missed = [(guid, tries) for guid, tries in attempts.items()
              if all(_failed(t) for t in tries)]
    asked = 0
    for guid, tries in missed:
        if asked >= limit:
            break
        with store.transaction() as run:
            if run("SELECT 1 FROM deliveries WHERE id = ?", (guid,)).fetchone():
                continue  # recorded after all (e.g. the insert landed after a 503)
            if run("INSERT INTO redeliveries (guid, asked_at) VALUES (?, ?) ON CONFLICT (guid) DO NOTHING "
                   "RETURNING guid", (guid, time.time())).fetchone() is None:
                continue  # asked before, by this replica or another
        latest = max(tries, key=_delivered_at)
        redeliver(app, int(str(latest["id"])))
        asked += 1
        log.info("asked GitHub to redeliver %s (%s)", guid, latest.get("event"))
    return asked


def _failed(item: dict[str, object]) -> bool:
    code = item.get("status_code")
    return not isinstance(code, int) or not 200 <= code < 300


def _delivered_at(item: dict[str, object]) -> float:
    try:
        return dt.datetime.fromisoformat(str(item.get("delivered_at"))).timestamp()
    except ValueError:
        return 0.0
