"""The webhook's writer: deliveries from concurrent requests are stored together, one transaction per batch.

Group commit, in a thread of its own per connection: while one batch is being committed the next one gathers,
so under load a commit costs each delivery a fraction of a transaction, and the event loop never waits on the
database (a held SQLite write lock or a restarting PostgreSQL costs a bounded wait, then 503). A delivery is
acknowledged only after the batch that holds it is committed. The pending queue is bounded: past it the
webhook answers 503 at once (backpressure, not collapse), and GitHub's failed delivery is recovered later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from bot.service.errors import StoreBusy
from bot.service.queue.deliveries import NewDelivery, Recorded
from bot.service.queue.store import Store

log = logging.getLogger(__name__)

MAX_BATCH = 256  # deliveries per transaction; a larger batch only lengthens the wait of its first one


@dataclass
class _Pending:
    delivery: NewDelivery
    future: asyncio.Future[Recorded]
    loop: asyncio.AbstractEventLoop


class Intake:
    """Queue deliveries for `stores` (one writer thread each) and resolve each caller's future on commit."""

    def __init__(self, stores: list[Store], timeout_s: float, max_pending: int) -> None:
        self.stores = stores
        for store in stores:
            if not store.postgres:  # a WAL checkpoint copies and syncs megabytes: the worker's commits run it,
                store.pragma("wal_autocheckpoint=0")  # never an acknowledgement's (SQLite: per connection)
        self.timeout_s = timeout_s
        self.max_pending = max_pending
        self._gathering: list[_Pending] = []  # this turn of the event loop's deliveries, not yet handed over
        self._hand_over_due = False
        self._waiting = 0  # requests awaiting their commit (queued, gathering or being written)
        self._queue: deque[_Pending] = deque()  # handed over to the writer threads
        self._ready = threading.Condition()
        self._stopping = False
        self._threads = [threading.Thread(target=self._write_loop, args=(store,), name=f"ddl-triage-intake-{k}",
                                          daemon=True) for k, store in enumerate(stores)]
        for thread in self._threads:
            thread.start()

    async def record(self, delivery: NewDelivery) -> Recorded:
        """Store `delivery` and its job; (new?, job id). StoreBusy when too many wait already, the database
        fails, or the commit does not come within `timeout_s` (a delivery still queued then is never written)."""
        if self._waiting >= self.max_pending:
            raise StoreBusy(f"{self._waiting} deliveries are waiting for the database; try again later")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Recorded] = loop.create_future()
        # No lock here: only the event loop touches `_gathering`; the writer's lock is taken once per batch.
        self._gathering.append(_Pending(delivery, future, loop))
        if not self._hand_over_due:  # once per turn of the event loop: this turn's requests make one batch
            self._hand_over_due = True
            loop.call_soon(self._hand_over, loop)
        self._waiting += 1
        try:
            return await future
        finally:
            self._waiting -= 1

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._gathering, self._hand_over_due = self._gathering, [], False
        # One timer per batch (not per request, nor asyncio.wait_for's task per wait): the ack's bound.
        loop.call_later(self.timeout_s, _expire, [pending.future for pending in batch], self.timeout_s)
        with self._ready:
            self._queue.extend(batch)
            self._ready.notify()

    def ping(self) -> None:
        """Raise unless the database answers on an intake connection (the readiness check)."""
        self.stores[0].ping()

    def close(self) -> None:
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout=10)
        for store in self.stores:
            store.close()

    def _take_batch(self) -> list[_Pending] | None:
        with self._ready:
            while not self._queue and not self._stopping:
                self._ready.wait()
            if not self._queue:
                return None
            batch: list[_Pending] = []
            while self._queue and len(batch) < MAX_BATCH:
                pending = self._queue.popleft()
                if not pending.future.done():  # its request already answered 503 (timed out): not written
                    batch.append(pending)
            return batch

    def _write_loop(self, store: Store) -> None:
        while (batch := self._take_batch()) is not None:
            if batch:
                self._write(store, batch)

    def _write(self, store: Store, batch: list[_Pending]) -> None:
        try:
            results = store.record_deliveries([pending.delivery for pending in batch])
        except Exception as exc:  # locked, unreachable, disk full: each request answers 503
            log.error("cannot store %d deliveries: %s", len(batch), exc)
            error = StoreBusy(f"the database cannot store the delivery now ({type(exc).__name__})")
            _resolve(batch, [error] * len(batch))
            return
        _resolve(batch, results)


def _resolve(batch: list[_Pending], outcomes: Sequence[Recorded | StoreBusy]) -> None:
    """Hand each outcome to its request, one wake-up per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Recorded], Recorded | StoreBusy]]] = {}
    for pending, outcome in zip(batch, outcomes, strict=True):
        by_loop.setdefault(pending.loop, []).append((pending.future, outcome))
    for loop, items in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop (shutdown): nobody waits for these answers
            loop.call_soon_threadsafe(_settle, items)


def _expire(futures: list[asyncio.Future[Recorded]], timeout_s: float) -> None:
    for future in futures:
        if not future.done():  # still queued (then never written) or being committed: 503 either way
            future.set_exception(StoreBusy(f"the database did not answer within {timeout_s:g}s"))


def _settle(items: list[tuple[asyncio.Future[Recorded], Recorded | StoreBusy]]) -> None:
    for future, outcome in items:
        if future.done():
            continue
        if isinstance(outcome, StoreBusy):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
