"""Connections to the service database: opening them (SQLite or PostgreSQL), one transaction on either,
replacing a connection the server dropped, and telling a database that cannot serve now from a bug."""

from __future__ import annotations

import select
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from bot.core.errors import ConfigError, TriageError
from bot.core.redaction import redact

MIN_FREE_BYTES = 1 << 20  # less room than this on the database's disk and the service says it is not ready
# SQLite's primary result codes of a database that cannot serve now: BUSY, LOCKED, IOERR, FULL, CANTOPEN.
SQLITE_UNAVAILABLE = frozenset({5, 6, 10, 13, 14})
SQLITE_BUSY = frozenset({5, 6})  # BUSY, LOCKED: another connection holds it, for now


@contextmanager
def transaction(conn: Any, postgres: bool) -> Iterator[Any]:
    """One transaction on a SQLite or PostgreSQL connection; yields `run(sql, params)` with `?` placeholders.

    SQLite takes its write lock at the start (BEGIN IMMEDIATE), so a busy database fails fast, not mid-way.
    """
    cur = conn.cursor()

    def run(sql: str, params: Sequence[Any] = ()) -> Any:
        cur.execute(sql.replace("?", "%s") if postgres else sql, tuple(params))
        return cur

    try:
        if not postgres:
            cur.execute("BEGIN IMMEDIATE")
        yield run
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        cur.close()


class StoreUnavailable(TriageError):
    """The database did not answer within the bounded wait (locked, unreachable, or its disk full)."""


def check_room(run: Any, url: str) -> None:
    """StoreUnavailable when SQLite cannot grow the database: at its page limit with no free page, or
    its disk nearly full (a delivery would fail with "database or disk is full")."""
    pages, limit, free = (int(run(f"PRAGMA {name}").fetchone()[0])
                          for name in ("page_count", "max_page_count", "freelist_count"))
    if pages >= limit and free == 0:
        raise StoreUnavailable(f"the database is full: {pages} pages of at most {limit} (PRAGMA max_page_count)")
    path = url.removeprefix("sqlite:///")
    if path != ":memory:":
        left = shutil.disk_usage(Path(path).parent).free
        if left < MIN_FREE_BYTES:
            raise StoreUnavailable(f"the disk holding {path} is full: {left} bytes free")


def unavailable(exc: BaseException) -> bool:
    """A database error that says nothing about the job being run: locked, full, I/O, unreachable, restarting.

    Such a failure is retried without spending the job's attempt; SQLite's other OperationalErrors (e.g. a
    syntax error: a bug) are not of this kind.
    """
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in SQLITE_UNAVAILABLE
    if isinstance(exc, sqlite3.Error):
        return False
    import psycopg

    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


def connect_sqlite(url: str, busy_timeout_s: float) -> sqlite3.Connection:
    """The service database on SQLite (autocommit, WAL): for the job store and the repository memory."""
    if not url.startswith("sqlite:///"):
        raise ConfigError(f"DDL_TRIAGE_DATABASE_URL {redact(url)!r} is not supported; use sqlite:///PATH or "
                          "postgresql://USER@HOST/DB")
    path = url.removeprefix("sqlite:///")
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
    _set_wal(conn, busy_timeout_s)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _set_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """Switch to WAL. While other connections open a new database at the same moment (replicas starting
    together), SQLite can answer BUSY at once, without its busy handler: try again within the busy timeout."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) not in SQLITE_BUSY or time.monotonic() >= deadline:
                conn.close()
                raise
            time.sleep(0.01)


def live_postgres(conn: Any, connect: Callable[[], Any]) -> Any:
    """`conn`, or a new connection where the server dropped it (a restart, `pg_ctl restart -m fast`).

    A dropped connection is found by its last use (broken), or, when the server closed it while it was
    idle, by its socket having something to read though nothing was asked (the server's "terminating
    connection" and EOF): checked without a round trip, so the first transaction after a restart succeeds.
    A server still down is a StoreUnavailable (retried), not the start-up's ConfigError.
    """
    if not (conn.closed or conn.broken or _idle_socket_readable(conn)):
        return conn
    with suppress(Exception):
        conn.close()
    try:
        return connect()
    except ConfigError as exc:
        raise StoreUnavailable(str(exc)) from None


def _idle_socket_readable(conn: Any) -> bool:
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def connect_postgres(url: str, busy_timeout_s: float) -> Any:
    import psycopg

    try:  # a statement (a lock wait included) is cancelled after the bound instead of hanging the caller
        return psycopg.connect(url, connect_timeout=max(1, round(busy_timeout_s)),
                               options=f"-c statement_timeout={round(busy_timeout_s * 1000)}")
    except psycopg.OperationalError as exc:
        reason = " ".join(redact(str(exc)).split())  # one line, and never the URL's password
        raise ConfigError(f"DDL_TRIAGE_DATABASE_URL: cannot connect to PostgreSQL: {reason}") from None
