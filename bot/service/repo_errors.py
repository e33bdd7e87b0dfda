"""Repositories the service will not serve until someone fixes them, and why: a `.github/ddl-triage.yml` that
cannot be read or does not validate. Written by the worker that read it, shown at `/healthz/details` (one row per
repository, in the service database, so every process sees it), removed once the file reads well again or the
repository is uninstalled."""

from __future__ import annotations

import time
import weakref
from collections.abc import Collection
from typing import TYPE_CHECKING

from bot.core.storage.schema import create_tables

if TYPE_CHECKING:  # the store creates this table with its own (`queue/store.py` imports SCHEMA from here)
    from bot.service.queue.store import Store

SCHEMA = """CREATE TABLE IF NOT EXISTS repo_config_errors (
    repo TEXT PRIMARY KEY, error TEXT NOT NULL, seen_at DOUBLE PRECISION NOT NULL)"""
_created: weakref.WeakSet[Store] = weakref.WeakSet()  # the stores whose database has the table (once each)


def _table(store: Store) -> None:
    if store not in _created:
        with store.transaction() as run:
            create_tables(run, store.postgres, SCHEMA)
        _created.add(store)


def record_config_error(store: Store, repo: str, error: str, now: float | None = None) -> None:
    _table(store)
    with store.transaction() as run:
        run("INSERT INTO repo_config_errors (repo, error, seen_at) VALUES (?, ?, ?) ON CONFLICT (repo) DO UPDATE "
            "SET error = excluded.error, seen_at = excluded.seen_at",
            (repo, error, time.time() if now is None else now))


def clear_config_errors(store: Store, repos: Collection[str]) -> None:
    """Forget the errors of `repos` (their files read well again, or they were uninstalled)."""
    if not repos:
        return
    _table(store)
    with store.transaction() as run:
        run(f"DELETE FROM repo_config_errors WHERE repo IN ({', '.join('?' * len(repos))})", tuple(repos))


def config_errors(store: Store) -> dict[str, dict[str, object]]:
    """Every repository's config error: {repo: {"error": ..., "seen_at": ...}}."""
    _table(store)
    with store.transaction() as run:
        rows = run("SELECT repo, error, seen_at FROM repo_config_errors ORDER BY repo").fetchall()
    return {str(r[0]): {"error": str(r[1]), "seen_at": float(r[2])} for r in rows}
