"""The case base: labelled issues with their embeddings and error-signature digests; k-nearest-neighbour search
by cosine, and the cases that share an error signature with an issue whatever their cosine.

Given when the issue was opened, only cases known to be opened strictly before it are found (the App never sees
the future): a case whose opening date is unknown, or the same day or later, is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from bot.core.domain import Case, ErrorSignature, Neighbour
from bot.reading.signatures import MATCHING_KINDS

MAX_SHARED_NEIGHBOURS = 5  # cases added beside the k nearest because they share a signature with the issue


@dataclass
class CaseIndex:
    """Cases, their unit-norm embeddings (one row per case) and the digests of their error signatures."""

    cases: list[Case]
    vectors: np.ndarray
    digests: list[tuple[str, ...]] = field(default_factory=list)  # per case; empty when not indexed

    def __post_init__(self) -> None:
        if len(self.cases) != len(self.vectors):
            raise ValueError(f"{len(self.cases)} cases but {len(self.vectors)} vectors")
        self.digests = list(self.digests) or [() for _ in self.cases]  # its own list: add_cases extends it
        if len(self.digests) != len(self.cases):
            raise ValueError(f"{len(self.cases)} cases but {len(self.digests)} signature lists")
        self._holders: dict[str, list[int]] = {}
        self._indexed = 0
        self._opened = np.zeros(0)  # per case, its opening date as a POSIX time (NaN: unknown)

    def opened(self) -> np.ndarray:
        """Per case, when it was opened (POSIX seconds; NaN where unknown); follows cases added later.

        A maintainer's correction (`source_file` "feedback") with no date was recorded before the triage that reads
        it, in the service's own time: it counts as known (-inf), so what maintainers taught is never hidden."""
        if len(self._opened) != len(self.cases):
            self._opened = np.array([c.created_at.timestamp() if c.created_at
                                     else -np.inf if c.source_file == "feedback" else np.nan for c in self.cases],
                                    dtype=np.float64)
        return self._opened

    def not_before(self, when: datetime | None) -> np.ndarray:
        """A mask of the cases not known to be opened strictly before `when` (none when `when` is None)."""
        if when is None:
            return np.zeros(len(self.cases), dtype=bool)
        opened = self.opened()
        with np.errstate(invalid="ignore"):
            return ~(opened < when.timestamp())  # NaN compares False: unknown counts as not before

    def __len__(self) -> int:
        return len(self.cases)

    def nearest(self, queries: np.ndarray, k: int, exclude: list[set[str]] | None = None,
                before: Sequence[datetime | None] | None = None) -> list[list[tuple[int, float]]]:
        """For each query row, the k most similar cases as (case index, cosine), best first.

        `exclude[i]` holds case ids never returned for query i (the issue itself, or its fold); `before[i]`, when
        the query's opening date is known, keeps only the cases opened strictly before it.
        """
        if len(self.cases) == 0 or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        sims = queries @ self.vectors.T
        out: list[list[tuple[int, float]]] = []
        for i, row in enumerate(sims):
            later = self.not_before(before[i] if before else None)
            order = np.argsort(-row, kind="stable")
            order = order[~later[order]]
            banned = exclude[i] if exclude else set()
            picked = [(int(j), float(row[j])) for j in order[: k + len(banned)]
                      if self.cases[j].id not in banned][:k]
            out.append(picked)
        return out

    def forget_lookup(self) -> None:
        """Cases were removed: the digest lookup is built again at its next use."""
        self._holders, self._indexed = {}, -1

    def holding(self, digest: str) -> list[int]:
        """The cases (indices) that show the error signature with this digest."""
        if self._indexed != len(self.digests):  # cases were added since the lookup was built
            self._holders = {}
            for i, digests in enumerate(self.digests):
                for d in digests:
                    self._holders.setdefault(d, []).append(i)
            self._indexed = len(self.digests)
        return self._holders.get(digest, [])

    def sharing(self, signatures: Sequence[ErrorSignature], exclude: set[str] | None = None,
                before: datetime | None = None) -> dict[int, ErrorSignature]:
        """Cases that share one of the issue's signatures, each with the first one it shares (the issue's
        signatures come most telling first); with `before`, only cases opened strictly before it."""
        later = self.not_before(before)
        shared: dict[int, ErrorSignature] = {}
        for signature in signatures:
            for j in self.holding(signature.digest):
                if j not in shared and not later[j] and self.cases[j].id not in (exclude or set()):
                    shared[j] = signature
        return shared

    def related(self, vector: np.ndarray, hits: list[tuple[int, float]], signatures: Sequence[ErrorSignature],
                exclude: set[str] | None = None, before: datetime | None = None) -> list[Neighbour]:
        """The nearest cases, plus up to MAX_SHARED_NEIGHBOURS more that share a signature of a kind that names
        the failure (not a bare signal) whatever their cosine; each marked with the signature it shares.
        With `before` (the issue's opening date), no case opened on or after it."""
        shared = self.sharing(signatures, exclude, before)
        known = {j for j, _ in hits}
        extra = [(j, float(vector @ self.vectors[j])) for j, s in shared.items()
                 if j not in known and s.kind in MATCHING_KINDS]
        extra = sorted(extra, key=lambda hit: (-hit[1], hit[0]))[:MAX_SHARED_NEIGHBOURS]
        ranked = sorted([*hits, *extra], key=lambda hit: -hit[1])
        return self.neighbours(ranked, {j: s.text for j, s in shared.items()})

    def neighbours(self, hits: list[tuple[int, float]], shared: dict[int, str] | None = None) -> list[Neighbour]:
        """Ids, links, type and labels; never the case's text (titles come from GitHub, in the service).
        `shared` gives, per case, the issue's canonical signature that the case shows too."""
        return [Neighbour(id=self.cases[j].id, url=self.cases[j].url, type=self.cases[j].type, score=s,
                          labels=self.cases[j].labels, signature=(shared or {}).get(j)) for j, s in hits]
