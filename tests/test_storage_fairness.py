"""SQLite's write lock is not fair: a bulk deletion in another process that commits and begins again at once
kept the webhook's intake out until its busy timeout ended (a CI run saw one 503 among 212 deliveries during an
erasure). The intake's store is `urgent`, and the deletion gives way before each batch: the intake always gets in."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bot.core.storage.database import StoreUnavailable, connect_sqlite
from bot.service.queue.store import Store

BULK = """
import sys, time
from pathlib import Path
from bot.core.storage.database import connect_sqlite, transaction
from bot.core.storage.fairness import give_way
url, stop = sys.argv[1], Path(sys.argv[2])
conn = connect_sqlite(url, 30.0)
while not stop.exists():  # back-to-back batches, each holding the write lock for about 5 ms
    if sys.argv[3] == "fair":
        give_way(url)
    with transaction(conn, False) as run:
        run("INSERT INTO filler (n) VALUES (1)")
        time.sleep(0.005)
        run("DELETE FROM filler")
"""


def deliveries_refused(tmp_path: Path, mode: str, urgent: bool, tries: int = 40) -> int:
    """Intake writes while another process deletes in back-to-back batches; how many were refused (the first
    refusal ends the count without the priority: one shows the race). The intake waits 0.4 s, as in the
    service with `ack_timeout_s = 1`."""
    url = f"sqlite:///{tmp_path / mode / 'store.sqlite3'}"
    intake = Store(url, busy_timeout_s=0.4, urgent=urgent)
    conn = connect_sqlite(url, 30.0)
    conn.execute("CREATE TABLE filler (n INTEGER)")
    conn.close()
    stop = tmp_path / mode / "stop"
    bulk = subprocess.Popen([sys.executable, "-c", BULK, url, str(stop), mode], cwd=Path(__file__).parents[1])
    refused = 0
    try:
        time.sleep(1.0)  # the deletion is under way
        assert bulk.poll() is None, "the bulk writer stopped"
        for n in range(tries):
            try:
                intake.record_delivery(f"d-{n}", "issues", "opened", "{}", f"o/r#{n}")
            except (StoreUnavailable, sqlite3.OperationalError):
                refused += 1
                if not urgent:
                    break
    finally:
        stop.touch()
        bulk.wait(timeout=30)
        intake.close()
    return refused


def test_the_intake_goes_before_a_bulk_deletion_for_the_sqlite_write_lock(tmp_path: Path) -> None:
    assert deliveries_refused(tmp_path, "plain", urgent=False) > 0, "without the priority the intake waits in vain"
    assert deliveries_refused(tmp_path, "fair", urgent=True) == 0
