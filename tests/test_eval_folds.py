"""Leakage-free splits, on hand-made vectors and cases."""

from __future__ import annotations

import numpy as np
import pytest

from bot.core.domain import Case
from bot.core.errors import ConfigError
from eval.folds import assign_folds, leaking_rows, near_duplicate_groups
from eval.links import linked_pairs
from eval.splits import Embedded, cv_splits, framework_splits, transfer_split


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


def thread(number: int, title: str, body: str = "", repo: str = "made/Up") -> Case:
    return Case(id=f"{repo}#{number}", repo=repo, number=number, title=title, body=body)


def test_a_fix_pr_its_issue_url_links_and_identical_titles_are_linked() -> None:
    cases = [thread(1, "crash when saving with stage three"),
             thread(2, "fix the crash on save", "This PR fixes #1."),
             thread(3, "unrelated hang"),
             thread(4, "unrelated hang again", "see https://github.com/other-org/Up/issues/3"),  # renamed org
             thread(5, "Loss becomes NaN with bf16"), thread(6, "loss becomes nan with BF16!"),
             thread(7, "Bug"), thread(8, "bug"),  # a short title is not a thread identity
             thread(9, "mentions rank #0 only")]
    assert linked_pairs(cases) == [(0, 1), (2, 3), (4, 5)]


def test_linked_records_share_a_fold_in_every_repetition() -> None:
    cases = [thread(i, f"made-up problem number {i}", f"duplicate of #{i - 1}" if i % 4 == 1 else "")
             for i in range(20)]
    vectors = np.eye(20, dtype=np.float32)  # no two texts alike: only the links group them
    data = Embedded(cases, [f"h{i}" for i in range(20)], vectors)
    splits, info = cv_splits(data, Embedded([], [], np.zeros((0, 20), dtype=np.float32)), 4, 0, 0.95, repeats=3)
    assert info["cross_reference_links"] == 5 and len(splits) == 12
    for repeat in range(3):
        fold_of = {c.id: s.fold for s in splits if s.repeat == repeat for c in s.test}
        assert len(fold_of) == 20
        for i in range(1, 20, 4):
            assert fold_of[f"made/Up#{i}"] == fold_of[f"made/Up#{i - 1}"]
    first = [[c.id for c in s.test] for s in splits if s.repeat == 0]
    second = [[c.id for c in s.test] for s in splits if s.repeat == 1]
    assert first != second  # each repetition draws its own folds


def test_leaving_one_framework_out_tests_each_repository_on_a_model_that_never_saw_it() -> None:
    cases = [thread(i, f"problem {i}", repo=("a/One", "b/Two", "c/Three")[i % 3]) for i in range(9)]
    data = Embedded(cases, [f"h{i}" for i in range(9)], np.eye(9, dtype=np.float32))
    splits, info = framework_splits(data, Embedded([], [], np.zeros((0, 9), dtype=np.float32)), 0.95)
    assert info["frameworks"] == ["a/One", "b/Two", "c/Three"]
    for split in splits:
        assert {c.repo for c in split.test} == {split.name}
        assert split.name not in {c.repo for c in split.train}
