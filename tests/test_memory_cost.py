"""Cheap triage on a big repository: the triage job's own write is appended to the loaded index (no reload),
the label model is never fitted inside triage and a fit is linear in the history, and corrections are read
per repository. Real SQLite, real numpy; the store is a subclass that only counts its full loads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bot.memory.index import MemoryIndex
from bot.memory.labels import MAX_HELD_OUT, LabelModel, LabelModels, held_out_rows
from bot.memory.store import MemoryIssue, MemoryStore
from bot.service.queue.store import Store

REPO = "o/big"
DIM = 16


class CountingStore(MemoryStore):
    """A real memory store that counts how often a repository's whole matrix is read."""

    loads = 0

    def search_rows(self, repo: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.loads += 1
        return super().search_rows(repo)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    opened = CountingStore(f"sqlite:///{tmp_path / 'memory.sqlite3'}")
    yield opened
    opened.close()


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def issue(number: int, labels: list[str] | None = None) -> MemoryIssue:
    return MemoryIssue(repo=REPO, number=number, title=f"#{number}", created_at=float(number),
                       text_hash=str(number), labels=labels or [])


def test_a_saved_issue_is_found_by_the_next_search_without_reloading_the_repository(store: CountingStore) -> None:
    rng = np.random.default_rng(1)
    store.upsert([(issue(n), unit(rng)) for n in range(1, 41)])
    index = MemoryIndex(store)
    index.search(REPO, unit(rng))
    assert store.loads == 1
    for n in range(41, 81):  # more than the arrays' room: they grow as they fill
        vector = unit(rng)
        index.save([(issue(n), vector)])
        [(found, score)] = index.search(REPO, vector, k=1)
        assert found.number == n and score == pytest.approx(1.0, abs=1e-5)
    edited = unit(rng)
    index.save([(issue(7), edited)])  # an edit replaces the issue's row, adds none
    assert index.search(REPO, edited, k=1)[0][0].number == 7
    assert store.loads == 1, "the saves were appended, nothing reloaded"
    assert store.count(REPO) == 80 and index._entry(REPO).size == 80
    fresh = MemoryIndex(store)
    fresh.search(REPO, edited)  # loaded as the database's bytes (read-only): an edit copies them first
    fresh.save([(issue(8), edited)])
    assert sorted(i.number for i, _ in fresh.search(REPO, edited, k=2)) == [7, 8]
    assert store.loads == 2


def test_a_write_by_another_worker_is_appended_and_only_a_deletion_makes_the_next_search_reload(
        store: CountingStore, tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    store.upsert([(issue(n), unit(rng)) for n in range(1, 11)])
    index = MemoryIndex(store)
    index.search(REPO, unit(rng))
    other = MemoryStore(store.url)  # another worker (or replica) on the same database
    theirs, edited = unit(rng), unit(rng)
    other.upsert([(issue(11), theirs), (issue(3), edited)])
    index.save([(issue(12), unit(rng))])
    assert index.search(REPO, theirs, k=1)[0][0].number == 11
    assert index.search(REPO, edited, k=1)[0][0].number == 3, "their edit replaced the row"
    assert store.loads == 1 and index._entry(REPO).size == 12, "their rows were appended, nothing reloaded"
    other.delete_issue(REPO, 11)
    other.close()
    assert 11 not in [found.number for found, _ in index.search(REPO, theirs, k=12)]
    assert store.loads == 2, "a deletion is read whole again"


def test_triage_reads_the_label_model_it_has_and_the_refit_runs_in_the_background() -> None:
    rng = np.random.default_rng(3)
    issues = [issue(n, ["area-a" if n % 2 else "area-b"]) for n in range(60)]
    vectors = np.stack([unit(rng) for _ in issues])
    fits: list[str] = []

    def load(repo: str) -> tuple[list[MemoryIssue], np.ndarray]:
        fits.append(repo)
        return issues, vectors

    models = LabelModels(load, lambda repo: len(issues))
    first = models.current(REPO)  # none yet: it abstains now, the fit runs beside it
    assert first.thresholds == {} and first.suggest(vectors[0]) == []
    models.wait_idle()
    assert fits == [REPO] and models.current(REPO).size == 60
    models.current(REPO)
    models.wait_idle()
    assert fits == [REPO], "not refitted until the history grows"
    models.forget(REPO)
    assert models.current(REPO).size == 0


def test_thresholds_are_chosen_on_a_bounded_sample_that_keeps_every_example_of_the_rare_labels() -> None:
    issues = [issue(n, ["common"] + (["rare"] if n % 150 == 0 else [])) for n in range(3000)]
    rows = held_out_rows(issues, Counter(name for i in issues for name in i.labels), limit=500)
    assert len(rows) == 500 and len(set(rows.tolist())) == 500
    assert {n for n in range(3000) if n % 150 == 0} <= set(rows.tolist())
    # Past the bound, a fit on two clusters whose labels follow the text still finds both thresholds.
    rng = np.random.default_rng(4)
    centres = np.stack([unit(rng), unit(rng)])
    big = [issue(n, [f"area-{n % 2}"]) for n in range(MAX_HELD_OUT + 200)]
    noisy = centres[[n % 2 for n in range(len(big))]] + 0.1 * rng.normal(size=(len(big), DIM))
    model = LabelModel.fit(big, (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32))
    assert set(model.thresholds) == {"area-0", "area-1"}
    assert [name for name, _ in model.suggest(centres[1])] == ["area-1"]


def test_corrections_are_read_for_one_repository(tmp_path: Path) -> None:
    queue = Store(f"sqlite:///{tmp_path / 'service.sqlite3'}")
    queue.save_feedback("d-1", "o/a", 1, "alice", "t", "b", {"symptom": "hang_timeout"})
    queue.save_feedback("d-2", "o/b", 2, "bob", "t", "b", {"symptom": "out_of_memory"})
    assert [case["repo"] for case in queue.feedback_cases(repo="o/a")] == ["o/a"]
    assert len(queue.feedback_cases()) == 2
    queue.close()
