"""Who goes first for SQLite's write lock: the webhook's intake before a bulk deletion.

SQLite's write lock is not fair. A waiting writer polls for it on a schedule (up to 100 ms apart), and a bulk
writer that commits a batch and begins the next at once holds it almost all the time: the waiter can miss every
gap until its busy timeout ends, and the delivery it carries is refused (503). So the two also meet at a
sidecar file's `flock` (`DATABASE-priority`). A writer that must answer quickly holds it shared while it waits
for and holds the write lock; before each batch, a bulk writer waits until it can take it exclusive, so it
starts no batch while such a writer waits. (Holding it exclusive through the batch instead only moves the race
to the `flock`: the bulk writer takes it back before the waiter's next try.) Both work across processes (the
web and the worker processes share the file), and the kernel drops a dead process's lock. PostgreSQL locks
rows, not the database: there, both are no-ops.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bot.core.storage.database import StoreUnavailable

log = logging.getLogger(__name__)

POLL_S = 0.001  # how often an urgent writer tries again while a bulk writer checks (an instant)
GIVE_WAY_MAX_S = 10.0  # the longest a bulk batch waits for urgent writers (one stopped holding it: go on)
_unopenable: set[str] = set()


def _sidecar(url: str) -> str | None:
    """The priority file of an SQLite database file; None where there is none (PostgreSQL, in memory)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///")
    return None if path == ":memory:" else f"{path}-priority"


def _open(path: str) -> int | None:
    """A new descriptor of the priority file (readable and writable by whoever may write the database: the
    umask decides), or None with a warning where it cannot be opened: writers then go without priority."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        if path not in _unopenable:  # once per file, not once per write
            _unopenable.add(path)
            log.warning("the write priority file %s cannot be opened (%s): writes go on without it", path, exc)
        return None


@contextmanager
def urgent_write(url: str, timeout_s: float) -> Iterator[None]:
    """Hold the priority shared: no bulk batch starts until this exits. The exclusive hold it can meet is a
    bulk writer's check, an instant; it waits at most `timeout_s`, else StoreUnavailable. (Each use opens its
    own descriptor: `flock` on a shared one converts the lock it holds instead of waiting.)"""
    path = _sidecar(url)
    fd = None if path is None else _open(path)
    if fd is None:
        yield
        return
    try:
        if not _flock_within(fd, fcntl.LOCK_SH, timeout_s, POLL_S):
            raise StoreUnavailable(f"the database is busy: no write priority within {timeout_s:g}s")
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


def give_way(url: str) -> None:
    """Before a bulk batch: wait until no urgent writer waits or writes (they hold the priority shared; this
    takes it exclusive and lets go at once, so an urgent writer that comes later waits at most one batch).
    At most GIVE_WAY_MAX_S: a web process stopped while it holds the priority (paused, in a debugger) must not
    stop the retention and the erasures."""
    path = _sidecar(url)
    fd = None if path is None else _open(path)
    if fd is None:
        return
    try:
        if not _flock_within(fd, fcntl.LOCK_EX, GIVE_WAY_MAX_S, POLL_S * 5):
            log.warning("a writer has held the write priority of %s for %gs; this batch goes on without waiting "
                        "for it", path, GIVE_WAY_MAX_S)
    finally:
        os.close(fd)


def _flock_within(fd: int, operation: int, timeout_s: float, poll_s: float) -> bool:
    """Take `operation` (LOCK_SH or LOCK_EX) on `fd`, trying every `poll_s` for at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
