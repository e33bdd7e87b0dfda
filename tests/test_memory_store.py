"""The memory's tables on SQLite and PostgreSQL (a throwaway cluster): upserts never duplicate, every write
moves the repository's version (what other replicas' indexes watch), uninstalling forgets one repository."""

from __future__ import annotations

import numpy as np
import pytest

from bot.core.storage.erasures import record_erasure
from bot.memory.index import MemoryIndex
from bot.memory.store import MemoryIssue, MemoryStore, SyncCursor
from bot.memory.titles import cache_title, cached_title
from tests.test_service_store import postgres_cluster, postgres_server, url  # noqa: F401  (fixtures: both engines)

A, B = "org/a", "org/b"


def issue(repo: str, number: int, **fields: object) -> MemoryIssue:
    return MemoryIssue.model_validate({"repo": repo, "number": number, "title": f"issue {number}",
                                       "created_at": float(number), "text_hash": str(number)} | fields)


def unit(seed: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


def test_the_memory_tables_upsert_version_search_and_forget_per_repository(url: str) -> None:  # noqa: F811
    store = MemoryStore(url)
    try:
        store.upsert([(issue(A, n), unit(n)) for n in range(1, 6)] + [(issue(B, 1), unit(1))])
        store.upsert([(issue(A, 3, state="closed", state_reason="duplicate", duplicate_of=1,
                             labels=["bug"]), unit(3))])
        assert store.count(A) == 5 and store.count(B) == 1
        assert store.issue(A, 3) == issue(A, 3, state="closed", state_reason="duplicate", duplicate_of=1,
                                          labels=["bug"])
        version = store.version(A)
        assert store.update_fields(A, 2, labels=["question"]) and store.version(A) > version
        assert not store.update_fields(A, 99, labels=[])

        index = MemoryIndex(store, max_rows=6)
        [(best, score)] = index.search(A, unit(4), k=1)
        assert best.number == 4 and score == pytest.approx(1.0, abs=1e-5)
        assert [i.number for i, _ in index.search(A, unit(4), k=5, exclude=4, before=3.0)] == sorted(
            [1, 2], key=lambda n: -float(unit(n) @ unit(4)))
        assert all(i.repo == B for i, _ in index.search(B, unit(4), k=5))
        assert index.loaded_repos() == [A, B]
        store.upsert([(issue(A, 6), unit(6))])  # a write (by any replica) is appended to A at its next query
        assert 6 in [i.number for i, _ in index.search(A, unit(6), k=1)]
        assert index.loaded_repos() == [A], "over max_rows: the least recently used repository is evicted"

        store.save_cursor(SyncCursor(repo=A, page=3, synced=200))
        cache_title(store, "x/y#1", "a title", "issue", "open")
        assert cached_title(store, "x/y#1", ttl_s=60.0) is not None
        assert cached_title(store, "x/y#1", ttl_s=-1.0) is None, "an expired title is read again"
        assert len(store.delete_repo(A)) == 6
        assert store.count(A) == 0 and store.cursor(A) is None and store.count(B) == 1
    finally:
        store.close()


def test_replicas_starting_together_on_one_new_database_each_get_the_tables(url: str) -> None:  # noqa: F811
    """Two replicas' first start on PostgreSQL raced on CREATE TABLE IF NOT EXISTS (a unique violation)."""
    from concurrent.futures import ThreadPoolExecutor

    from bot.service.queue.store import Store

    def start(_: int) -> int:
        service, memory = Store(url), MemoryStore(url)
        try:
            return memory.count(A) + service.job_counts().get("queued", 0)
        finally:
            memory.close()
            service.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(start, range(4))) == [0, 0, 0, 0]


def test_every_cursor_is_read_in_one_query_for_the_open_healthz(url: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """/healthz counts the sync cursors: one query whatever the number of repositories (it was one per cursor)."""
    store = MemoryStore(url)
    try:
        for n in range(300):
            store.save_cursor(SyncCursor(repo=f"org/r{n:03d}", installation_id=1, status="done", synced=n))
        looked_up: list[str] = []
        one = MemoryStore.cursor
        monkeypatch.setattr(MemoryStore, "cursor", lambda self, repo: looked_up.append(repo) or one(self, repo))
        cursors = store.cursors()
        assert [c.repo for c in cursors] == [f"org/r{n:03d}" for n in range(300)]
        assert [c.synced for c in cursors] == list(range(300)) and looked_up == []
    finally:
        store.close()


def test_every_text_an_issue_had_is_forgotten_with_it_and_an_overtaken_write_says_what_to_forget(
        url: str) -> None:  # noqa: F811
    store = MemoryStore(url)
    try:
        store.upsert([(issue(A, 1, text_hash="opened", source_updated_at=10.0), unit(1))])
        store.upsert([(issue(A, 1, text_hash="edited", source_updated_at=20.0), unit(2))])
        late = store.upsert([(issue(A, 1, text_hash="retried", source_updated_at=15.0), unit(3))])
        assert late.stale == {(A, 1)} and store.issue(A, 1).text_hash == "edited"  # type: ignore[union-attr]
        store.upsert([(issue(A, 2, text_hash="other"), unit(4))])
        # a deleted issue: every text it had (the stale retry was embedded too), and nothing of another issue
        assert store.delete_issue(A, 1) == ["edited", "opened", "retried"]
        assert store.delete_issue(A, 1) == []
        store.upsert([(issue(A, 3, text_hash="third"), unit(5))])
        store.upsert([(issue(A, 3, text_hash="third-edited"), unit(6))])
        assert store.delete_repo(A) == ["other", "third", "third-edited"]

        with store.transaction() as run:
            record_erasure(run, B, now=100.0)
        overtaken = store.upsert([(issue(B, 1, text_hash="typed-during-uninstall"), unit(7))],
                                 unless_erased_since=50.0)
        assert overtaken.erased == ("typed-during-uninstall",) and store.count(B) == 0
        assert store.delete_repo(B) == [], "an overtaken write stores nothing, not even its hash"
    finally:
        store.close()
