"""Leakage-free splits: near-duplicate texts share a fold, and no case base holds a copy of a test record."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NEAR_DUPLICATE_COSINE = 0.95


def near_duplicate_groups(vectors: np.ndarray, threshold: float = NEAR_DUPLICATE_COSINE,
                          links: Sequence[tuple[int, int]] = ()) -> list[list[int]]:
    """Connected groups of rows whose cosine similarity (unit-norm rows) reaches `threshold`, or that are linked.

    `links` are pairs of rows that belong together whatever their similarity (a fix PR and its issue).
    Transitive: if a ~ b and b ~ c, all three are one group. Groups are ordered by their first row.
    """
    n = len(vectors)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if n:
        sims = vectors @ vectors.T
        edges = [*zip(*np.nonzero(np.triu(sims >= threshold, k=1)), strict=True), *links]
        for i, j in edges:
            a, b = root(int(i)), root(int(j))
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def assign_folds(groups: Sequence[Sequence[int]], folds: int, seed: int) -> list[int]:
    """A fold per row: groups in a seeded random order, the larger first, each to the smallest fold."""
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, not {folds}")
    total = sum(len(g) for g in groups)
    if total < folds:
        raise ValueError(f"{total} records cannot fill {folds} folds")
    shuffled = [int(i) for i in np.random.default_rng(seed).permutation(len(groups))]
    order = sorted(shuffled, key=lambda i: -len(groups[i]))  # stable: ties keep the seeded order
    sizes = [0] * folds
    fold_of = [0] * total
    for i in order:
        target = sizes.index(min(sizes))
        for row in groups[i]:
            fold_of[row] = target
        sizes[target] += len(groups[i])
    return fold_of


def leaking_rows(test_vectors: np.ndarray, test_ids: Sequence[str], base_vectors: np.ndarray,
                 base_ids: Sequence[str], threshold: float = NEAR_DUPLICATE_COSINE) -> set[int]:
    """Rows of a case base that copy a test record: the same id, or a near-duplicate text."""
    ids = set(test_ids)
    leaking = {i for i, case_id in enumerate(base_ids) if case_id in ids}
    if len(test_vectors) and len(base_vectors):
        close = (base_vectors @ test_vectors.T >= threshold).any(axis=1)
        leaking.update(int(i) for i in np.flatnonzero(close))
    return leaking
