"""Leakage-free splits: near-duplicate texts share a fold, and no case base holds a copy of a test record."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bot.models.grouping import NEAR_DUPLICATE_COSINE, assign_folds, near_duplicate_groups

__all__ = ["NEAR_DUPLICATE_COSINE", "assign_folds", "leaking_rows", "near_duplicate_groups"]


def leaking_rows(test_vectors: np.ndarray, test_ids: Sequence[str], base_vectors: np.ndarray,
                 base_ids: Sequence[str], threshold: float = NEAR_DUPLICATE_COSINE) -> set[int]:
    """Rows of a case base that copy a test record: the same id, or a near-duplicate text."""
    ids = set(test_ids)
    leaking = {i for i, case_id in enumerate(base_ids) if case_id in ids}
    if len(test_vectors) and len(base_vectors):
        close = (base_vectors @ test_vectors.T >= threshold).any(axis=1)
        leaking.update(int(i) for i in np.flatnonzero(close))
    return leaking
