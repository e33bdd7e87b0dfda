"""The memory's tables in the service database, and the columns added to them since the first release (added
to an older database when a process opens it)."""

from __future__ import annotations

from typing import Any

from bot.core.storage.erasures import create_erasure_table
from bot.core.storage.schema import create_tables

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_issues (
    repo TEXT NOT NULL, number INTEGER NOT NULL, type TEXT NOT NULL, title TEXT NOT NULL, state TEXT NOT NULL,
    state_reason TEXT, labels TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, closed_at DOUBLE PRECISION,
    closed_by TEXT, duplicate_of INTEGER, text_hash TEXT NOT NULL, vector {blob} NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (repo, number));
CREATE TABLE IF NOT EXISTS memory_signatures (
    repo TEXT NOT NULL, number INTEGER NOT NULL, digest TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL,
    PRIMARY KEY (repo, number, digest));
CREATE INDEX IF NOT EXISTS memory_signatures_by_digest ON memory_signatures (repo, digest);
CREATE TABLE IF NOT EXISTS memory_sync (
    repo TEXT PRIMARY KEY, installation_id BIGINT, page INTEGER NOT NULL, synced INTEGER NOT NULL,
    status TEXT NOT NULL, since TEXT, error TEXT, started_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS memory_versions (
    repo TEXT PRIMARY KEY, version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_titles (
    key TEXT PRIMARY KEY, title TEXT, type TEXT, state TEXT, fetched_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS memory_text_hashes (
    repo TEXT NOT NULL, number INTEGER NOT NULL, text_hash TEXT NOT NULL, PRIMARY KEY (repo, number, text_hash));
"""
# `memory_text_hashes`: every text an issue had when the memory stored it (an edit replaces `text_hash`), so that
# erasing the issue or its repository forgets the cached vectors of its older texts too.
# (table, column, type) added after the first release. `source_updated_at`: the issue's `updated_at` on
# GitHub, so an older payload (a retried delivery) never overwrites a fresher state. `written_version`: the
# repository's version its last write made, and `erased_version` the version of its last deletion, so an
# index loaded at version V appends the rows written since V instead of reloading (unless one was deleted).
MIGRATIONS = (("memory_issues", "source_updated_at", "DOUBLE PRECISION"),
              ("memory_issues", "written_version", "BIGINT"), ("memory_versions", "erased_version", "BIGINT"))


def create_memory_tables(run: Any, postgres: bool) -> None:
    """The memory's tables, with every later column, inside the caller's transaction."""
    create_tables(run, postgres, SCHEMA.format(blob="BYTEA" if postgres else "BLOB"))
    create_erasure_table(run, postgres)
    for table, column, kind in MIGRATIONS:
        if postgres:
            run(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {kind}")
        elif column not in {row[1] for row in run(f"PRAGMA table_info({table})").fetchall()}:
            run(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    run("CREATE INDEX IF NOT EXISTS memory_issues_by_version ON memory_issues (repo, written_version)")


def delete_issue_rows(run: Any, repo: str, numbers: list[int]) -> set[str]:
    """Inside the caller's transaction, the rows of these issues of `repo` (their record, signatures and text
    hashes); returns the hashes of every text they had (RETURNING: what a concurrent write added goes too)."""
    if not numbers:
        return set()
    marks = ", ".join("?" * len(numbers))
    hashes: set[str] = set()
    for table in ("memory_issues", "memory_text_hashes"):
        hashes |= {str(r[0]) for r in run(f"DELETE FROM {table} WHERE repo = ? AND number IN ({marks}) "
                                          "RETURNING text_hash", (repo, *numbers)).fetchall()}
    run(f"DELETE FROM memory_signatures WHERE repo = ? AND number IN ({marks})", (repo, *numbers))
    return hashes
