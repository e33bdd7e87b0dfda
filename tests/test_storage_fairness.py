"""SQLite's write lock is not fair: a bulk deletion in another process that commits and begins again at once
kept the webhook's intake out until its busy timeout ended (a CI run saw one 503 among 212 deliveries during an
erasure). The intake's store is `urgent`, and the deletion gives way before each batch: the intake always gets in."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.core.storage import fairness
from bot.core.storage.database import StoreUnavailable, connect_sqlite
from bot.service.queue.store import Store

BULK = """
import sys, time
from pathlib import Path
from bot.core.storage.database import connect_sqlite, transaction
from bot.core.storage.fairness import give_way
url, stop = sys.argv[1], Path(sys.argv[2])
conn = connect_sqlite(url, 30.0)
batches = 0
while not stop.exists():  # back-to-back batches, each holding the write lock for about 5 ms
    if sys.argv[3] == "fair":
        give_way(url)
    with transaction(conn, False) as run:
        run("INSERT INTO filler (n) VALUES (1)")
        time.sleep(0.005)
        run("DELETE FROM filler")
    batches += 1
    if batches == 3:
        (stop.parent / "under-way").touch()
"""


def deliveries_refused(tmp_path: Path, mode: str, urgent: bool, tries: int = 40, budget_s: float = 120.0) -> int:
    """Intake writes while another process deletes in back-to-back batches; how many were refused (the first
    refusal ends the count without the priority: one shows the race), in at most `tries` deliveries and
    `budget_s` seconds. The intake waits 0.4 s, as in the service with `ack_timeout_s = 1`."""
    url = f"sqlite:///{tmp_path / mode / 'store.sqlite3'}"
    intake = Store(url, busy_timeout_s=0.4, urgent=urgent)
    conn = connect_sqlite(url, 30.0)
    conn.execute("CREATE TABLE filler (n INTEGER)")
    conn.close()
    stop = tmp_path / mode / "stop"
    bulk = subprocess.Popen([sys.executable, "-c", BULK, url, str(stop), mode], cwd=Path(__file__).parents[1])
    refused = 0
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / mode / "under-way").exists():
            assert bulk.poll() is None and time.monotonic() < deadline, "the bulk writer never got under way"
            time.sleep(0.01)
        ends = time.monotonic() + budget_s
        for n in range(tries):
            if time.monotonic() > ends:
                break
            try:
                intake.record_delivery(f"d-{n}", "issues", "opened", "{}", f"o/r#{n}")
            except (StoreUnavailable, sqlite3.OperationalError):
                refused += 1
                if not urgent:
                    break
        assert bulk.poll() is None, "the bulk writer stopped while the intake wrote"
    finally:
        stop.touch()
        try:
            bulk.wait(timeout=60)
        except subprocess.TimeoutExpired:
            bulk.kill()
            raise
        finally:
            intake.close()
    return refused


def test_the_intake_goes_before_a_bulk_deletion_for_the_sqlite_write_lock(tmp_path: Path) -> None:
    assert deliveries_refused(tmp_path, "fair", urgent=True) == 0
    # The control: without the priority, the same intake is refused. The race depends on the machine's
    # scheduling (here the first delivery is refused; one CI machine let 40 in a row through), so it is given
    # many deliveries and a minute, and a machine that never shows it says so instead of failing the fair half.
    if deliveries_refused(tmp_path, "plain", urgent=False, tries=1000, budget_s=60.0) == 0:
        pytest.xfail("this machine did not reproduce the unfair write lock in 60 s: the fair half passed, "
                     "but without its control")


def test_a_bulk_batch_waits_for_a_stopped_urgent_writer_only_so_long(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A web process paused while it holds the priority must not stop the retention and the erasures."""
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    monkeypatch.setattr(fairness, "GIVE_WAY_MAX_S", 0.3)
    with fairness.urgent_write(url, timeout_s=1.0):
        started = time.monotonic()
        fairness.give_way(url)
        assert time.monotonic() - started >= 0.3  # it did wait for the writer, then went on
    assert "goes on without waiting for it" in caplog.text
    caplog.clear()
    fairness.give_way(url)  # nobody holds it now: at once, and nothing to say
    assert caplog.text == ""
