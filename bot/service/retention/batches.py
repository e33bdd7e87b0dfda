"""Deleting in small transactions: select up to BATCH keys, delete them, commit, again until none is left, so a
writer (the webhook's intake) never waits behind more than one batch (on SQLite, bot.core.storage.fairness
makes sure it does not wait behind the next one either)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.core.storage.fairness import give_way
from bot.service.queue.store import Store

BATCH = 500  # rows per transaction: a few milliseconds of the database's write lock
Delete = Callable[[Any, list[Any]], int]


def batched(store: Store, select: str, params: tuple[Any, ...], delete: Delete) -> int:
    """Run `select` (its last placeholder is the LIMIT) and `delete` the keys it gives, one transaction per batch;
    how many rows `delete` removed in all."""
    total = 0
    while True:
        give_way(store.url)
        with store.transaction() as run:
            keys = [row[0] for row in run(select, (*params, BATCH)).fetchall()]
            total += delete(run, keys) if keys else 0
        if len(keys) < BATCH:
            return total


def deleting(table: str, column: str) -> Delete:
    """A `Delete` of the rows of `table` whose `column` is one of the keys."""
    def delete(run: Any, keys: list[Any]) -> int:
        return int(run(f"DELETE FROM {table} WHERE {column} IN ({', '.join('?' * len(keys))})", keys).rowcount)
    return delete


def delete_deliveries(run: Any, deliveries: list[Any]) -> int:
    """Deliveries with their jobs (a delivery has one job; the job goes first: it references the delivery)."""
    deleting("jobs", "delivery_id")(run, deliveries)
    return deleting("deliveries", "id")(run, deliveries)
