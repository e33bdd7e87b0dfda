"""Forgetting a repository's memory (uninstalled, or its config turned the bot off before the sync), a batch of
issues per transaction: at 50,000 issues one transaction would hold the database's write lock for seconds."""

from __future__ import annotations

from bot.core.storage.fairness import give_way
from bot.memory.store import MemoryStore

BATCH = 200  # issues per transaction (a row holds its 1.5 KB vector): milliseconds of the write lock


def delete_repo(store: MemoryStore, repo: str, batch: int | None = None) -> list[str]:
    """Its issues, their vectors and signatures, its sync cursor, its version and the cached titles of its
    issues; returns the hashes of every text its issues had, older ones an edit replaced included (for the
    embedding cache to forget)."""
    batch = batch or BATCH
    hashes: list[str] = []
    while True:
        give_way(store.url)
        with store.transaction() as run:
            rows = run("SELECT number, text_hash FROM memory_issues WHERE repo = ? LIMIT ?", (repo, batch)).fetchall()
            marks = ", ".join("?" * len(rows))
            for table in ("memory_issues", "memory_signatures") if rows else ():
                run(f"DELETE FROM {table} WHERE repo = ? AND number IN ({marks})", (repo, *(r[0] for r in rows)))
        hashes += [str(r[1]) for r in rows]
        if len(rows) < batch:
            break
    while True:  # the older texts' hashes, of issues gone above (or never stored again after an edit)
        give_way(store.url)
        with store.transaction() as run:
            rows = run("SELECT number, text_hash FROM memory_text_hashes WHERE repo = ? LIMIT ?",
                       (repo, batch)).fetchall()
            for number, digest in rows:
                run("DELETE FROM memory_text_hashes WHERE repo = ? AND number = ? AND text_hash = ?",
                    (repo, number, digest))
        hashes += [str(r[1]) for r in rows]
        if len(rows) < batch:
            break
    with store.transaction() as run:
        for table in ("memory_signatures", "memory_sync", "memory_versions"):
            run(f"DELETE FROM {table} WHERE repo = ?", (repo,))
        # A title's key is "owner/name#number": the repository's keys are the primary key's range [name#, name$).
        run("DELETE FROM memory_titles WHERE key >= ? AND key < ?", (f"{repo}#", f"{repo}$"))
    return sorted(set(hashes))
