"""Per-repository vectors searched in memory: loaded lazily from the database, evicted least-recently-used.

Each query first reads the repository's version (one primary-key lookup), so a write by another worker or
replica sharing the database is seen at the next query: the rows written since the loaded version are read
and appended (or replaced) in place; only a deletion since then makes it read the repository whole again. A
write through `save` (the triage job's issue) is appended at once (amortised: the arrays grow by half when
full). Only numbers, creation times and vectors are held; the k issues found are read back from the database.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bot.memory.store import MemoryIssue, MemoryStore, Written

GROWTH = 1.5


@dataclass
class _Loaded:
    """A repository's rows: the first `size` of each array are live, the rest is room to append into."""

    version: int
    numbers: np.ndarray
    created: np.ndarray
    vectors: np.ndarray
    size: int = -1

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = len(self.numbers)

    def put(self, number: int, created: float, vector: np.ndarray) -> None:
        """Replace the row of `number` (an edited issue), or append it."""
        vector = np.asarray(vector, dtype=np.float32)
        if not self.vectors.flags.writeable:  # as loaded: a view of the database's bytes; copied once, with room
            self._grow(len(vector))
        found = np.flatnonzero(self.numbers[:self.size] == number)
        if len(found):
            self.created[found[0]], self.vectors[found[0]] = created, vector
            return
        if self.size == len(self.numbers) or self.vectors.shape[1] != len(vector):  # full (or a first row)
            self._grow(len(vector))
        self.numbers[self.size], self.created[self.size], self.vectors[self.size] = number, created, vector
        self.size += 1

    def _grow(self, dim: int) -> None:
        room = max(16, int(len(self.numbers) * GROWTH))
        numbers, created = np.zeros(room, dtype=np.int64), np.zeros(room)
        vectors = np.zeros((room, dim), dtype=np.float32)
        numbers[:self.size], created[:self.size] = self.numbers[:self.size], self.created[:self.size]
        if self.size:
            vectors[:self.size] = self.vectors[:self.size]
        self.numbers, self.created, self.vectors = numbers, created, vectors


class MemoryIndex:
    """Exact cosine over one repository's matrix (unit-norm rows); ~10^5 rows per repository stay fast."""

    def __init__(self, store: MemoryStore, max_rows: int = 500_000) -> None:
        self.store = store
        self.max_rows = max_rows  # across every loaded repository; the least recently used go first
        self._loaded: OrderedDict[str, _Loaded] = OrderedDict()
        self._lock = threading.Lock()

    def loaded_repos(self) -> list[str]:
        with self._lock:
            return list(self._loaded)

    def search(self, repo: str, vector: np.ndarray, k: int = 5, exclude: int | None = None,
               before: float | None = None) -> list[tuple[MemoryIssue, float]]:
        """The k most similar issues of `repo` only, best first; `before` keeps issues created before then."""
        entry = self._entry(repo)
        size = entry.size
        if size == 0 or k <= 0:
            return []
        numbers = entry.numbers[:size]
        sims = entry.vectors[:size] @ np.asarray(vector, dtype=np.float32)
        if exclude is not None:
            sims[numbers == exclude] = -np.inf
        if before is not None:
            sims[entry.created[:size] >= before] = -np.inf
        take = min(k, len(sims))
        top = np.argpartition(-sims, take - 1)[:take]
        top = top[np.argsort(-sims[top], kind="stable")]
        kept = [int(j) for j in top if np.isfinite(sims[j])]
        found = self.store.issues_by_number(repo, [int(numbers[j]) for j in kept])
        return [(found[int(numbers[j])], float(sims[j])) for j in kept if int(numbers[j]) in found]

    def save(self, items: Sequence[tuple[MemoryIssue, np.ndarray]], unless_erased_since: float | None = None
             ) -> Written:
        """Write issues to the store and into the loaded matrices: the next search reloads nothing unless
        another writer (a sync, another replica) wrote to the repository since it was loaded."""
        written = self.store.upsert(items, unless_erased_since)
        with self._lock:
            for repo, (before, after) in written.versions.items():
                entry = self._loaded.get(repo)
                if entry is None or before == 0 or entry.version != before:
                    continue  # not loaded, or someone else wrote in between: the next search reads what changed
                for issue, vector in items:
                    if issue.repo == repo and (repo, issue.number) not in written.stale:
                        entry.put(issue.number, issue.created_at, vector)
                entry.version = after
        return written

    def scored(self, repo: str, vector: np.ndarray, numbers: list[int]) -> list[tuple[MemoryIssue, float]]:
        """These issues of `repo` with their cosine to `vector`, best first (those no longer stored left out)."""
        entry = self._entry(repo)
        rows = {int(n): j for j, n in enumerate(entry.numbers)}
        sims = {n: float(entry.vectors[rows[n]] @ np.asarray(vector, dtype=np.float32)) for n in numbers if n in rows}
        found = self.store.issues_by_number(repo, list(sims))
        return sorted(((found[n], s) for n, s in sims.items() if n in found), key=lambda hit: (-hit[1], hit[0].number))

    def forget(self, repo: str) -> None:
        with self._lock:
            self._loaded.pop(repo, None)

    def _entry(self, repo: str) -> _Loaded:
        version = self.store.version(repo)
        with self._lock:
            entry = self._loaded.get(repo)
            if entry is not None and entry.version == version:
                self._loaded.move_to_end(repo)
                return entry
        if entry is not None and (changes := self.store.changes_since(repo, entry.version)) is not None:
            with self._lock:  # written since it was loaded, none deleted: append (or replace) those rows
                now, (numbers, created, vectors) = changes
                for number, at, vector in zip(numbers, created, vectors, strict=True):
                    entry.put(int(number), float(at), vector)
                entry.version = max(entry.version, now)
                self._loaded.move_to_end(repo)
                self._evict()
            return entry
        entry = _Loaded(version, *self.store.search_rows(repo))
        with self._lock:
            self._loaded[repo] = entry
            self._loaded.move_to_end(repo)
            self._evict()
        return entry

    def _evict(self) -> None:
        """Past `max_rows` across repositories, the least recently used go (the caller holds the lock)."""
        while len(self._loaded) > 1 and sum(e.size for e in self._loaded.values()) > self.max_rows:
            self._loaded.popitem(last=False)
