"""Forgetting a repository's memory (uninstalled, or its config turned the bot off before the sync), a batch of
issues per transaction: at 50,000 issues one transaction would hold the database's write lock for seconds."""

from __future__ import annotations

from bot.core.storage.fairness import give_way
from bot.memory.store import MemoryStore
from bot.memory.tables import delete_issue_rows

BATCH = 200  # issues per transaction (a row holds its 1.5 KB vector): milliseconds of the write lock


def delete_repo(store: MemoryStore, repo: str, batch: int | None = None) -> list[str]:
    """Its issues, their vectors and signatures, its sync cursor, its version and the cached titles of its
    issues; returns the hashes of every text its issues had, older ones an edit replaced included (for the
    embedding cache to forget)."""
    batch = batch or BATCH
    hashes: set[str] = set()
    # The issues with every text hash they had, then any text hash left of an issue no longer stored.
    for table in ("memory_issues", "memory_text_hashes"):
        while True:
            give_way(store.url)
            with store.transaction() as run:
                numbers = [int(r[0]) for r in run(f"SELECT DISTINCT number FROM {table} WHERE repo = ? LIMIT ?",
                                                  (repo, batch)).fetchall()]
                hashes |= delete_issue_rows(run, repo, numbers)
            if len(numbers) < batch:
                break
    with store.transaction() as run:
        for table in ("memory_signatures", "memory_sync", "memory_versions"):
            run(f"DELETE FROM {table} WHERE repo = ?", (repo,))
        # A title's key is "owner/name#number": the repository's keys are the primary key's range [name#, name$).
        run("DELETE FROM memory_titles WHERE key >= ? AND key < ?", (f"{repo}#", f"{repo}$"))
    return sorted(hashes)
