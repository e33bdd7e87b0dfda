"""Leakage-free splits, on hand-made vectors and cases."""

from __future__ import annotations

import numpy as np
import pytest

from bot.domain import Case
from bot.errors import ConfigError
from eval.folds import assign_folds, leaking_rows, near_duplicate_groups
from eval.splits import Embedded, cv_splits, transfer_split


def unit(*rows: list[float]) -> np.ndarray:
    matrix = np.array(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def case(i: str) -> Case:
    return Case(id=i, title=f"made-up issue {i}", body="text")


def embedded(ids: list[str], vectors: np.ndarray) -> Embedded:
    return Embedded([case(i) for i in ids], [f"h{i}" for i in ids], vectors)


def test_near_duplicates_are_grouped_transitively() -> None:
    # 0 ~ 1 and 1 ~ 2 (cosine >= 0.95) but 0 and 2 are further apart; 3 stands alone
    vectors = unit([1, 0, 0], [1, 0.3, 0], [1, 0.62, 0], [0, 0, 1])
    assert float(vectors[0] @ vectors[2]) < 0.95
    assert near_duplicate_groups(vectors, 0.95) == [[0, 1, 2], [3]]


def test_folds_keep_groups_together_balanced_and_seeded() -> None:
    groups = [[0, 1, 2], [3], [4], [5, 6], [7], [8], [9]]
    fold_of = assign_folds(groups, 3, seed=0)
    for group in groups:
        assert len({fold_of[i] for i in group}) == 1
    sizes = sorted(fold_of.count(f) for f in range(3))
    assert sizes[-1] - sizes[0] <= 1
    assert fold_of == assign_folds(groups, 3, seed=0)
    assert any(assign_folds(groups, 3, seed=s) != fold_of for s in range(1, 6))


def test_leaking_rows_are_copies_by_id_or_by_text() -> None:
    test = unit([1, 0, 0])
    base = unit([1, 0.01, 0], [0, 1, 0], [0, 0, 1])
    assert leaking_rows(test, ["t1"], base, ["b1", "b2", "t1"]) == {0, 2}


def test_cv_case_bases_never_hold_a_copy_of_a_test_record() -> None:
    data = embedded(["d0", "d1", "d2", "d3"], unit([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]))
    # x0 copies d0's text; x1 shares d3's id; x2 is unrelated
    extra = embedded(["x0", "d3", "x2"], unit([1, 0.01, 0, 0], [0.5, 0.5, 0.5, -0.5], [-1, -1, 1, 1]))
    splits, info = cv_splits(data, extra, folds=2, seed=0, threshold=0.95)
    for split in splits:
        test_ids = {c.id for c in split.test}
        base_ids = [c.id for c in split.train]
        assert not test_ids & set(base_ids)
        assert len(base_ids) == len(set(base_ids))
        assert ("x0" in base_ids) == ("d0" not in test_ids)
        assert "x2" in base_ids
    assert sorted(c.id for s in splits for c in s.test) == ["d0", "d1", "d2", "d3"]
    assert info["fold_sizes"] == [2, 2]
    assert info["extra_same_id_as_dataset"] == 1


def test_transfer_tests_everything_against_the_other_set_minus_copies() -> None:
    data = embedded(["d0", "d1"], unit([1, 0], [0, 1]))
    train = embedded(["t0", "t1"], unit([1, 0.001], [-1, 1]))
    [split], info = transfer_split(data, train, threshold=0.95)
    assert [c.id for c in split.test] == ["d0", "d1"]
    assert [c.id for c in split.train] == ["t1"]
    assert info["train_dropped_as_copies"] == 1


def test_too_few_records_for_the_folds_is_a_clear_error() -> None:
    data = embedded(["d0", "d1"], unit([1, 0], [1, 0.001]))
    with pytest.raises(ConfigError, match="cannot fill 2 folds"):
        cv_splits(data, embedded([], np.zeros((0, 2), dtype=np.float32)), folds=2, seed=0, threshold=0.95)
