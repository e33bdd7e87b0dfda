"""Train/test splits of a benchmark: k folds of one dataset, or one dataset against another (transfer)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from bot.core.domain import Case
from bot.core.errors import ConfigError
from bot.models.embedding import Embedder, text_hash
from bot.reading.normalise import normalise
from bot.reading.opening import as_opened
from eval.folds import assign_folds, leaking_rows, near_duplicate_groups
from eval.links import linked_pairs


@dataclass
class Split:
    """One fit-and-predict round: the case base the engine learns from and the records it predicts."""

    fold: int
    train: list[Case]
    test: list[Case]
    dropped_extra: int = 0  # extra / training cases left out because they copy a test record
    repeat: int = 0  # which repetition of the cross-validation (its folds are drawn with seed + repeat)
    name: str = ""  # what the test part is, when it is not a numbered fold (a framework left out)
    unscored: int = 0  # test records left out as opened: their window has no opening post (they still train)

Text = Literal["opened", "thread"]  # what a test record is predicted from: its opening post, or the whole window


def with_text(splits: Sequence[Split], text: Text) -> list[Split]:
    """The splits with each test part predicted from `text`: `opened` cuts every test record to its opening post
    and leaves out (counted in `unscored`) those that have none; the case bases are cut (or not) when the engine
    is fitted (`Settings.case_text`)."""
    if text == "thread":
        return list(splits)
    out = []
    for split in splits:
        opened = [as_opened(c) for c in split.test]
        kept = [c for c in opened if c is not None]
        out.append(replace(split, test=kept, unscored=len(opened) - len(kept)))
    return out


@dataclass
class Embedded:
    """Cases with the text the engine embeds, its hash and its embedding (one row per case)."""

    cases: list[Case]
    hashes: list[str]
    vectors: np.ndarray

    @classmethod
    def of(cls, cases: Sequence[Case], embedder: Embedder) -> Embedded:
        texts = [normalise(c).text for c in cases]
        vectors = embedder.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
        return cls(list(cases), [text_hash(t) for t in texts], vectors)

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.cases]


def cv_splits(data: Embedded, extra: Embedded, folds: int, seed: int, threshold: float, repeats: int = 1
              ) -> tuple[list[Split], dict[str, object]]:
    """k folds, `repeats` times, with linked and near-duplicate records kept together; extra cases join every
    case base, minus copies. Repetition r draws its folds with seed + r."""
    links = linked_pairs(data.cases)
    groups = near_duplicate_groups(data.vectors, threshold, links)
    if len(groups) < folds:
        raise ConfigError(f"{len(data.cases)} usable records ({len(groups)} after grouping linked and "
                          f"near-duplicate records) cannot fill {folds} folds; use fewer --folds or a larger "
                          "--dataset")
    splits = []
    for repeat in range(repeats):
        fold_of = assign_folds(groups, folds, seed + repeat)
        splits += _splits_of(data, extra, fold_of, threshold, repeat, [f"fold {f + 1}" for f in range(folds)])
    multi = [g for g in groups if len(g) > 1]
    info = {"near_duplicate_cosine": threshold, "cross_reference_links": len(links),
            "linked_or_near_duplicate_groups": len(multi), "records_in_groups": sum(len(g) for g in multi),
            "extra_same_id_as_dataset": len(set(extra.ids) & set(data.ids)), "repeats": repeats,
            "fold_sizes": [len(s.test) for s in splits if s.repeat == 0],
            "extra_dropped_per_fold": [s.dropped_extra for s in splits if s.repeat == 0]}
    return splits, info


def framework_splits(data: Embedded, extra: Embedded, threshold: float) -> tuple[list[Split], dict[str, object]]:
    """Leave one framework out: each repository's records are tested by a model that never saw that repository
    (records without one form their own part)."""
    names = sorted({c.repo or "(no repository)" for c in data.cases})
    if len(names) < 2:
        raise ConfigError(f"leaving one framework out needs records of 2 or more repositories, not {names}")
    fold_of = [names.index(c.repo or "(no repository)") for c in data.cases]
    splits = _splits_of(data, extra, fold_of, threshold, 0, names)
    info = {"near_duplicate_cosine": threshold, "fold_by": "framework", "frameworks": names,
            "fold_sizes": [len(s.test) for s in splits], "extra_dropped_per_fold": [s.dropped_extra for s in splits]}
    return splits, info


def _splits_of(data: Embedded, extra: Embedded, fold_of: Sequence[int], threshold: float, repeat: int,
               names: Sequence[str]) -> list[Split]:
    same_record = {j for j, case_id in enumerate(extra.ids) if case_id in set(data.ids)}  # the dataset's copy wins
    splits = []
    for fold, name in enumerate(names):
        test_rows = [i for i, f in enumerate(fold_of) if f == fold]
        leaking = leaking_rows(data.vectors[test_rows], [data.ids[i] for i in test_rows], extra.vectors,
                               extra.ids, threshold)
        train = [c for i, c in enumerate(data.cases) if fold_of[i] != fold]
        train += [c for j, c in enumerate(extra.cases) if j not in leaking | same_record]
        splits.append(Split(fold, train, [data.cases[i] for i in test_rows], len(leaking), repeat, name))
    return splits


def transfer_split(data: Embedded, train: Embedded, threshold: float
                   ) -> tuple[list[Split], dict[str, object]]:
    """All of `train` (minus copies of test records) as the case base, all of `data` as the test set."""
    leaking = leaking_rows(data.vectors, data.ids, train.vectors, train.ids, threshold)
    kept = [c for j, c in enumerate(train.cases) if j not in leaking]
    split = Split(0, kept, list(data.cases), len(leaking))
    info = {"near_duplicate_cosine": threshold, "fold_sizes": [len(data.cases)],
            "train_dropped_as_copies": len(leaking)}
    return [split], info


TEMPORAL_TEST_SHARE = 0.2


def temporal_split(data: Embedded, extra: Embedded, threshold: float, share: float = TEMPORAL_TEST_SHARE
                   ) -> tuple[list[Split], dict[str, object]]:
    """How the App lives: per repository, the newest `share` of its dated records are tested by a model fitted
    on everything older (and the extra cases). Records linked to or near-duplicating a test record leave the
    case base; undated records (no section header at all) cannot be placed in time and only train."""
    links = linked_pairs(data.cases)
    groups = near_duplicate_groups(data.vectors, threshold, links)
    test_rows: set[int] = set()
    cutoffs: dict[str, str] = {}
    for repo in sorted({c.repo or "(no repository)" for c in data.cases}):
        dated = sorted((c.created_at, c.id, i) for i, c in enumerate(data.cases)
                       if (c.repo or "(no repository)") == repo and c.created_at is not None)
        newest = dated[len(dated) - round(len(dated) * share):] if dated else []
        test_rows.update(i for _, _, i in newest)
        if newest:
            cutoffs[repo] = newest[0][0].date().isoformat()
    if not test_rows:
        raise ConfigError("no dated records to test: the temporal split needs records whose window shows a date")
    together = {i for g in groups if test_rows & set(g) for i in g} - test_rows
    rows = sorted(test_rows)
    leaking = leaking_rows(data.vectors[rows], [data.ids[i] for i in rows], extra.vectors, extra.ids, threshold)
    same_record = {j for j, case_id in enumerate(extra.ids) if case_id in set(data.ids)}
    train = [c for i, c in enumerate(data.cases) if i not in test_rows | together]
    train += [c for j, c in enumerate(extra.cases) if j not in leaking | same_record]
    split = Split(0, train, [data.cases[i] for i in rows], len(leaking), 0,
                  f"newest {share:.0%} per repository")
    info = {"near_duplicate_cosine": threshold, "fold_by": "time", "test_share": share,
            "first_tested_day": cutoffs, "fold_sizes": [len(rows)], "extra_dropped_per_fold": [len(leaking)],
            "dropped_as_linked_or_near_duplicate_of_a_test_record": len(together),
            "undated_records_train_only": sum(c.created_at is None for c in data.cases)}
    return [split], info
