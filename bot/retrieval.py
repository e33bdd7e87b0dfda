"""The case base: labelled issues with their embeddings, and k-nearest-neighbour search by cosine."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bot.domain import Case, Neighbour


@dataclass
class CaseIndex:
    """Cases and their unit-norm embeddings (one row per case)."""

    cases: list[Case]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        if len(self.cases) != len(self.vectors):
            raise ValueError(f"{len(self.cases)} cases but {len(self.vectors)} vectors")

    def __len__(self) -> int:
        return len(self.cases)

    def nearest(self, queries: np.ndarray, k: int, exclude: list[set[str]] | None = None
                ) -> list[list[tuple[int, float]]]:
        """For each query row, the k most similar cases as (case index, cosine), best first.

        `exclude[i]` holds case ids never returned for query i (the issue itself, or its fold).
        """
        if len(self.cases) == 0 or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        sims = queries @ self.vectors.T
        out: list[list[tuple[int, float]]] = []
        for i, row in enumerate(sims):
            order = np.argsort(-row, kind="stable")
            banned = exclude[i] if exclude else set()
            picked = [(int(j), float(row[j])) for j in order[: k + len(banned)]
                      if self.cases[j].id not in banned][:k]
            out.append(picked)
        return out

    def neighbours(self, hits: list[tuple[int, float]]) -> list[Neighbour]:
        """Ids, links, type and labels; never the case's text (titles come from GitHub, in the service)."""
        return [Neighbour(id=self.cases[j].id, url=self.cases[j].url, type=self.cases[j].type, score=s,
                          labels=self.cases[j].labels) for j, s in hits]
