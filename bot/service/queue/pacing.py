"""Write pacing shared by every process and replica: at most one write per interval per installation."""

from __future__ import annotations

import time

from bot.service.queue.store import Store


def reserve_write(store: Store, installation_id: int, interval_s: float, now: float | None = None) -> float:
    """Book this process's next write to one installation; returns when it may happen (wait until then).

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
