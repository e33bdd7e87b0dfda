"""Per-repository vectors searched in memory: loaded lazily from the database, evicted least-recently-used.

Each query first reads the repository's version (one primary-key lookup), so a write by another replica
sharing the same PostgreSQL is seen at the next query; the repository is then reloaded. Only numbers,
creation times and vectors are held; the k issues found are read back from the database.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from bot.memory.store import MemoryIssue, MemoryStore


@dataclass
class _Loaded:
    version: int
    numbers: np.ndarray
    created: np.ndarray
    vectors: np.ndarray


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
        if len(entry.numbers) == 0 or k <= 0:
            return []
        sims = entry.vectors @ np.asarray(vector, dtype=np.float32)
        if exclude is not None:
            sims[entry.numbers == exclude] = -np.inf
        if before is not None:
            sims[entry.created >= before] = -np.inf
        take = min(k, len(sims))
        top = np.argpartition(-sims, take - 1)[:take]
        top = top[np.argsort(-sims[top], kind="stable")]
        kept = [int(j) for j in top if np.isfinite(sims[j])]
        found = self.store.issues_by_number(repo, [int(entry.numbers[j]) for j in kept])
        return [(found[int(entry.numbers[j])], float(sims[j])) for j in kept if int(entry.numbers[j]) in found]

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
        entry = _Loaded(version, *self.store.search_rows(repo))
        with self._lock:
            self._loaded[repo] = entry
            self._loaded.move_to_end(repo)
            while len(self._loaded) > 1 and sum(len(e.numbers) for e in self._loaded.values()) > self.max_rows:
                self._loaded.popitem(last=False)
        return entry
