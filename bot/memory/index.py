"""Per-repository vectors searched in memory: loaded lazily from the database, evicted least-recently-used.

Each query first asks the database for the repository's version (row count, latest write), so a write by
another replica sharing the same PostgreSQL is seen at the next query; a repository is then reloaded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from bot.memory.store import MemoryIssue, MemoryStore


@dataclass
class _Loaded:
    version: tuple[int, float]
    issues: list[MemoryIssue]
    vectors: np.ndarray
    numbers: np.ndarray
    created: np.ndarray


class MemoryIndex:
    """Brute-force cosine over one repository's matrix (unit-norm rows): exact, and fast enough to ~10^5 rows."""

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
        if not entry.issues:
            return []
        sims = entry.vectors @ np.asarray(vector, dtype=np.float32)
        if before is not None or exclude is not None:
            mask = np.ones(len(sims), dtype=bool)
            if exclude is not None:
                mask &= entry.numbers != exclude
            if before is not None:
                mask &= entry.created < before
            sims = np.where(mask, sims, -np.inf)
        take = min(k, len(sims))
        top = np.argpartition(-sims, take - 1)[:take]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(entry.issues[j], float(sims[j])) for j in top if np.isfinite(sims[j])]

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
        issues, vectors = self.store.vectors(repo)
        entry = _Loaded(version, issues, vectors, np.array([i.number for i in issues], dtype=np.int64),
                        np.array([i.created_at for i in issues], dtype=np.float64))
        with self._lock:
            self._loaded[repo] = entry
            self._loaded.move_to_end(repo)
            while len(self._loaded) > 1 and sum(len(e.issues) for e in self._loaded.values()) > self.max_rows:
                self._loaded.popitem(last=False)
        return entry
