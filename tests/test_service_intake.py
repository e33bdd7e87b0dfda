"""The webhook's writer on a real SQLite file: group commit, bounded waits, backpressure, nothing half-done."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.service.errors import StoreBusy
from bot.service.queue.deliveries import NewDelivery, Recorded
from bot.service.queue.store import Store
from bot.service.web.intake import Intake


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path / 'intake.sqlite3'}"
    reader = Store(url)
    yield url, reader
    reader.close()


def delivery(n: int) -> NewDelivery:
    return NewDelivery(f"d-{n}", "issues", "opened", '{"action": "opened"}', f"o/r#{n}")


DEADLINE_S = 60.0  # generous: what the tests wait for comes in well under a second


class HeldWriteLock:
    """Another process's transaction holding SQLite's write lock, in a thread of its own, until `release()` (or
    DEADLINE_S, so that an intake that waits for the lock instead of answering ends the test, not hangs it)."""

    def __init__(self, url: str) -> None:
        self.path = url.removeprefix("sqlite:///")
        self.held, self.releasing, self.released = threading.Event(), threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        self.held.set()
        self.releasing.wait(DEADLINE_S)
        conn.execute("ROLLBACK")
        conn.close()
        self.released.set()

    def __enter__(self) -> HeldWriteLock:
        self.thread.start()
        assert self.held.wait(DEADLINE_S)
        return self

    def release(self) -> None:
        self.releasing.set()
        assert self.released.wait(DEADLINE_S)

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.thread.join(DEADLINE_S)


def observed(store: Store) -> threading.Event:
    """Set once the store's writer thread has taken a batch and is writing it (waiting for the lock)."""
    writing = threading.Event()
    record_many = store.record_deliveries

    def record(deliveries: list[NewDelivery]) -> list[Recorded]:
        writing.set()
        return record_many(deliveries)

    store.record_deliveries = record  # type: ignore[method-assign]  # observed, not replaced
    return writing


async def until(event: threading.Event) -> None:
    """Let the event loop run until `event` is set (a poll against DEADLINE_S)."""
    deadline = time.monotonic() + DEADLINE_S
    while not event.is_set():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def test_concurrent_deliveries_are_committed_together_each_with_its_own_job(db: tuple[str, Store]) -> None:
    url, reader = db
    writer = Store(url, busy_timeout_s=1.0)
    transactions = []
    record_many = writer.record_deliveries

    def counted(deliveries: list[NewDelivery]) -> list[Recorded]:
        transactions.append(len(deliveries))
        return record_many(deliveries)

    writer.record_deliveries = counted  # type: ignore[method-assign]  # observed, not replaced
    intake = Intake([writer], timeout_s=5, max_pending=1000)
    try:
        async def main() -> list[Recorded]:
            return await asyncio.gather(*(intake.record(delivery(n)) for n in range(100)))

        results = asyncio.run(main())
    finally:
        intake.close()
    assert all(new for new, _ in results) and len({job for _, job in results}) == 100
    # The 100 requests start in one turn of the event loop, before the hand-over it schedules: one batch.
    assert transactions == [100]
    assert reader.job_counts() == {"queued": 100}


def test_a_held_write_lock_gives_503_within_the_bound_and_a_refused_delivery_is_not_stored(
        db: tuple[str, Store]) -> None:
    url, reader = db
    intake = Intake([Store(url, busy_timeout_s=0.3)], timeout_s=1.0, max_pending=1000)
    with HeldWriteLock(url) as lock:  # another process holds the write lock
        async def main() -> list[Recorded | BaseException]:
            return await asyncio.gather(*(intake.record(delivery(n)) for n in range(5)),
                                        return_exceptions=True)

        outcomes = asyncio.run(main())
        answered_while_held = not lock.released.is_set()  # within the bound, not once the lock is free
    assert answered_while_held, "the intake waited for the lock instead of answering within its bound"
    assert all(isinstance(o, StoreBusy) for o in outcomes), outcomes
    assert reader.job_counts() == {}
    # Once the lock is free the same deliveries (GitHub's redelivery) are stored, each once.
    async def again() -> list[Recorded]:
        return await asyncio.gather(*(intake.record(delivery(n)) for n in range(5)))

    try:
        assert [new for new, _ in asyncio.run(again())] == [True] * 5
    finally:
        intake.close()
    assert reader.job_counts() == {"queued": 5}


def test_past_the_pending_bound_the_webhook_is_refused_at_once(db: tuple[str, Store]) -> None:
    url, reader = db
    store = Store(url, busy_timeout_s=DEADLINE_S)  # the writer waits for the lock as long as the test holds it
    writing = observed(store)
    intake = Intake([store], timeout_s=DEADLINE_S, max_pending=3)
    try:
        with HeldWriteLock(url) as lock:
            async def main() -> list[Recorded | BaseException]:
                first = [asyncio.ensure_future(intake.record(delivery(n))) for n in range(3)]
                await until(writing)  # handed over; the writer waits for the lock
                refused = intake.record(delivery(99))
                with pytest.raises(StoreBusy, match="waiting for the database"):
                    refused.send(None)  # at once: its very first step raises, it never waits for anything
                refused.close()
                lock.release()
                return await asyncio.gather(*first, return_exceptions=True)

            outcomes = asyncio.run(main())
    finally:
        intake.close()
    assert [o if isinstance(o, BaseException) else o[0] for o in outcomes] == [True] * 3
    assert reader.job_counts() == {"queued": 3}


def test_past_the_bound_a_queued_delivery_is_dropped_and_one_being_written_is_kept(db: tuple[str, Store]) -> None:
    """Both requests answer 503 (GitHub keeps them as failed deliveries); the one the writer had already taken
    is stored anyway and its redelivery is a duplicate, the one still queued is never written."""
    url, reader = db
    store = Store(url, busy_timeout_s=DEADLINE_S)  # the writer waits for the lock as long as the test holds it
    writing = observed(store)
    # The bound is what is tested, not measured: 2 s leaves the writer thread time to take delivery 1.
    intake = Intake([store], timeout_s=2.0, max_pending=10)
    with HeldWriteLock(url) as lock:
        async def main() -> list[Recorded | BaseException]:
            taken = asyncio.ensure_future(intake.record(delivery(1)))
            await until(writing)  # the writer has taken delivery 1 and waits for the lock
            queued = asyncio.ensure_future(intake.record(delivery(2)))
            outcomes = await asyncio.gather(taken, queued, return_exceptions=True)
            lock.release()
            return outcomes

        outcomes = asyncio.run(main())
        intake.close()  # waits for the writer to finish its batch
    assert all(isinstance(o, StoreBusy) and "within 2s" in str(o) for o in outcomes), outcomes
    assert reader.job_counts() == {"queued": 1}
    assert reader.delivery_payload("d-1") and reader.record_delivery("d-2", "issues", "opened", "{}", "o/r#2")[0]
