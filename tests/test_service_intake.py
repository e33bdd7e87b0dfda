"""The webhook's writer on a real SQLite file: group commit, bounded waits, backpressure, nothing half-done."""

from __future__ import annotations

import asyncio
import sqlite3
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
    assert sum(transactions) == 100 and len(transactions) < 10  # one turn of the loop: one batch, not 100
    assert reader.job_counts() == {"queued": 100}


def test_a_held_write_lock_gives_503_within_the_bound_and_a_refused_delivery_is_not_stored(
        db: tuple[str, Store]) -> None:
    url, reader = db
    intake = Intake([Store(url, busy_timeout_s=0.3)], timeout_s=1.0, max_pending=1000)
    holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        async def main() -> list[Recorded | BaseException]:
            return await asyncio.gather(*(intake.record(delivery(n)) for n in range(5)),
                                        return_exceptions=True)

        started = time.monotonic()
        outcomes = asyncio.run(main())
        waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert all(isinstance(o, StoreBusy) for o in outcomes) and waited < 2.0
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
    intake = Intake([Store(url, busy_timeout_s=2.0)], timeout_s=5, max_pending=3)
    holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        async def main() -> tuple[list[Recorded | BaseException], float]:
            first = [asyncio.ensure_future(intake.record(delivery(n))) for n in range(3)]
            await asyncio.sleep(0.1)  # handed over; the writer waits for the lock
            started = time.monotonic()
            with pytest.raises(StoreBusy, match="waiting for the database"):
                await intake.record(delivery(99))
            refused_after = time.monotonic() - started
            holder.execute("ROLLBACK")
            return await asyncio.gather(*first, return_exceptions=True), refused_after

        outcomes, refused_after = asyncio.run(main())
    finally:
        holder.close()
        intake.close()
    assert refused_after < 1.0  # at once: not after the 2 s the writer waits for the lock
    assert [o[0] for o in outcomes if not isinstance(o, BaseException)] == [True] * 3
    assert reader.job_counts() == {"queued": 3}


def test_past_the_bound_a_queued_delivery_is_dropped_and_one_being_written_is_kept(db: tuple[str, Store]) -> None:
    """Both requests answer 503 (GitHub keeps them as failed deliveries); the one the writer had already taken
    is stored anyway and its redelivery is a duplicate, the one still queued is never written."""
    url, reader = db
    intake = Intake([Store(url, busy_timeout_s=5.0)], timeout_s=0.3, max_pending=10)
    holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        async def main() -> list[Recorded | BaseException]:
            taken = asyncio.ensure_future(intake.record(delivery(1)))
            await asyncio.sleep(0.05)  # the writer has taken delivery 1 and waits for the lock
            queued = asyncio.ensure_future(intake.record(delivery(2)))
            outcomes = await asyncio.gather(taken, queued, return_exceptions=True)
            holder.execute("ROLLBACK")
            return outcomes

        outcomes = asyncio.run(main())
        intake.close()  # waits for the writer to finish its batch
    finally:
        holder.close()
    assert all(isinstance(o, StoreBusy) and "within 0.3s" in str(o) for o in outcomes)
    assert reader.job_counts() == {"queued": 1}
    assert reader.delivery_payload("d-1") and reader.record_delivery("d-2", "issues", "opened", "{}", "o/r#2")[0]
