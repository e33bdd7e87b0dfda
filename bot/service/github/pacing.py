"""Write pacing shared by every process and replica: at most one write per interval per installation; and a
rate limit that GitHub answered to one caller pauses every caller of that installation until it lifts.

A write that is not due yet does not sleep in the worker: the job books the installation's next free slot
and is queued again for that time (`WriteDeferred`), holding the slot, so its next run writes at once
without booking again. A job deferred N places back runs once more, not N times."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from bot.service.errors import WriteDeferred

if TYPE_CHECKING:  # the service database creates these tables (PACING_SCHEMA) and passes itself in
    from bot.service.queue.store import Store

PACING_SCHEMA = """
CREATE TABLE IF NOT EXISTS write_pacing (
    installation_id BIGINT PRIMARY KEY, next_write_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS github_pauses (
    installation_id BIGINT PRIMARY KEY, paused_until DOUBLE PRECISION NOT NULL);
"""

# A wait this short is slept: less than a rerun of the job's reads would cost.
INLINE_WAIT_S = 0.05
_held_slot: ContextVar[float | None] = ContextVar("ddl_triage_held_write_slot", default=None)


def reserve_write(store: Store, installation_id: int, interval_s: float, now: float | None = None) -> float:
    """Book the next write to one installation; returns when it may happen.

    The booking is one upsert on a row per installation, so every process on the same database sees the
    others' bookings and writes to one installation are at least `interval_s` apart in all.
    """
    now = time.time() if now is None else now
    with store.transaction() as run:
        row = run("INSERT INTO write_pacing (installation_id, next_write_at) VALUES (?, ?) "
                  "ON CONFLICT (installation_id) DO UPDATE SET next_write_at = CASE "
                  "WHEN write_pacing.next_write_at + ? > ? THEN write_pacing.next_write_at + ? ELSE ? END "
                  "RETURNING next_write_at", (installation_id, now, interval_s, now, interval_s, now)).fetchone()
    return float(row[0])


def pace_write(store: Store, installation_id: int, interval_s: float) -> None:
    """Return when a write to the installation may go now; else raise `WriteDeferred` with the booked slot.

    The job's own slot (booked by its earlier run, see `holding_write_slot`) is used first, once.
    """
    held = _held_slot.get()
    if held is not None:
        _held_slot.set(None)  # one write per booking: a second write of the job books its own
        if held <= time.time() + INLINE_WAIT_S:
            time.sleep(max(0.0, held - time.time()))
            return
    slot = reserve_write(store, installation_id, interval_s)
    wait = slot - time.time()
    if wait > INLINE_WAIT_S:
        raise WriteDeferred(f"write to installation {installation_id} paced to its slot", slot)
    if wait > 0:
        time.sleep(wait)


@contextmanager
def holding_write_slot(slot: float | None) -> Iterator[None]:
    """Run a job with the write slot its earlier run booked (None: it holds none)."""
    token = _held_slot.set(slot)
    try:
        yield
    finally:
        _held_slot.reset(token)


def pause_installation(store: Store, installation_id: int, wait_s: float, now: float | None = None) -> None:
    """GitHub rate-limited the installation for `wait_s`: every process's calls as it wait that long (a
    secondary limit answers whoever calls next, not only the job that hit it). A longer pause is kept."""
    until = (time.time() if now is None else now) + max(0.0, wait_s)
    with store.transaction() as run:
        run("INSERT INTO github_pauses (installation_id, paused_until) VALUES (?, ?) ON CONFLICT (installation_id) "
            "DO UPDATE SET paused_until = CASE WHEN excluded.paused_until > github_pauses.paused_until "
            "THEN excluded.paused_until ELSE github_pauses.paused_until END", (installation_id, until))


def paused_for(store: Store, installation_id: int, now: float | None = None) -> float:
    """Seconds the installation's calls must still wait (0: none), as any process recorded it."""
    now = time.time() if now is None else now
    with store.transaction() as run:
        row = run("SELECT paused_until FROM github_pauses WHERE installation_id = ?", (installation_id,)).fetchone()
    return max(0.0, float(row[0]) - now) if row else 0.0


class SharedPause:
    """One installation's pause in the shared database (what `InstallationClient` asks before each call)."""

    def __init__(self, store: Store, installation_id: int) -> None:
        self.store, self.installation_id = store, installation_id

    def remaining(self) -> float:
        return paused_for(self.store, self.installation_id)

    def record(self, wait_s: float) -> None:
        pause_installation(self.store, self.installation_id, wait_s)


def save_prepared(store: Store, delivery_id: str, prepared: str) -> None:
    """What a job deferred by pacing had computed before its write (see `handlers/triage.py`): its next run
    writes it without reading, triaging or asking the LLM again. Kept on the job row, so it goes with the job."""
    with store.transaction() as run:
        run("UPDATE jobs SET prepared = ? WHERE delivery_id = ?", (prepared, delivery_id))


def take_prepared(store: Store, delivery_id: str) -> str | None:
    """The job's prepared write, if an earlier run left one (it stays until the job ends)."""
    with store.transaction() as run:
        row = run("SELECT prepared FROM jobs WHERE delivery_id = ?", (delivery_id,)).fetchone()
    return str(row[0]) if row and row[0] is not None else None
