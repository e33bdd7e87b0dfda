"""Benchmarks as the App sees an issue: the opening post by default (records without one train but are not
scored), the thread on request, and the temporal split (per repository, the newest 20% tested)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bot.core.domain import Case
from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.knowledge.taxonomy import Taxonomy
from bot.models.engine import Engine, fit_engine
from bot.reading.opening import case_base_text, has_opening_post
from eval.cli import build_config
from eval.data import load_set
from eval.splits import Embedded, Split, as_opened, temporal_split, with_text
from eval.task import load_task, task_config

OPENING = "someone · description · 2023-04-02\nThe run stops at step 10 with a timeout in all-reduce."
THREAD = f"{OPENING}\n\nmaintainer · comment · 2023-04-05\nFixed by raising the NCCL timeout; see the fix PR."
MID_THREAD = "maintainer · comment · 2023-05-01\nThis was a driver problem; upgrading the driver fixed it."


def _case(i: int, body: str, repo: str = "acme/trainer", opened: datetime | None = None) -> Case:
    return Case(id=f"{repo}#{i}", repo=repo, title=f"report {i}", body=body, created_at=opened,
                labels={"symptom": "hang_timeout"})


def test_a_test_record_is_cut_at_the_first_comment_header_and_dated_by_its_opening() -> None:
    opened = as_opened(_case(1, THREAD, opened=datetime(2023, 4, 5, tzinfo=UTC)))
    assert opened is not None and opened.body == OPENING
    assert opened.created_at == datetime(2023, 4, 2, tzinfo=UTC)
    assert as_opened(_case(2, MID_THREAD)) is None


def test_as_opened_cuts_only_the_test_part_and_counts_what_it_cannot_score() -> None:
    train = [_case(3, THREAD), _case(4, MID_THREAD)]
    split = Split(fold=0, train=train, test=[_case(1, THREAD), _case(2, MID_THREAD)])
    [opened] = with_text([split], "opened")
    assert [c.body for c in opened.test] == [OPENING] and opened.unscored == 1
    assert opened.train == train  # the case base keeps the whole windows
    assert with_text([split], "thread") == [split]


@pytest.mark.parametrize(("name", "records", "without_opening_post"),
                         [("ddl-dev.jsonl", 362, 93), ("ddl-dev-r3.jsonl", 121, 29), ("ddl-dev-r4.jsonl", 124, 24)])
def test_the_gold_files_have_this_many_records_that_cannot_be_scored_as_opened(
        gold_dir: Path, taxonomy: Taxonomy, name: str, records: int, without_opening_post: int) -> None:
    cases = load_set(gold_dir / name, taxonomy).cases
    [split] = with_text([Split(fold=0, train=[], test=cases)], "opened")
    assert len(cases) == records and split.unscored == without_opening_post
    assert all(not has_opening_post(c.body) for c in cases if as_opened(c) is None)
    assert all(c.created_at is not None and "· comment ·" not in c.body for c in split.test)


def test_every_task_runs_as_opened_unless_told_thread(gold_dir: Path, settings: Settings) -> None:
    config = task_config(load_task("ddl-dev-cv"), gold_dir, llm_configured=False)
    assert config.text == "opened"
    assert gold_dir / "ddl-dev-r4.jsonl" in config.datasets
    assert config.extra_cases_for(gold_dir / "ddl-dev-r4.jsonl")[0] == (gold_dir / "liu23.jsonl",)
    def text_of(task: str, text: str | None = None) -> str:
        return build_config(settings, task=task, dataset=None, extra_cases=None, no_extra_cases=False, train_on=None,
                            predictors=None, folds=None, seed=None, bootstrap=None, fit_cache=True, text=text).text

    assert text_of("liu23-cv") == "opened"
    assert text_of("ddl-dev-cv", "thread") == "thread"


def _embedded(cases: list[Case]) -> Embedded:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(cases), 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return Embedded(cases, [c.id for c in cases], vectors)


def test_the_temporal_split_tests_the_newest_fifth_of_each_repository() -> None:
    days = [datetime(2022, 1, 1 + i, tzinfo=UTC) for i in range(10)]
    cases = [_case(i, f"report body {i}", "acme/trainer", day) for i, day in enumerate(days)]
    cases += [_case(i, f"other body {i}", "acme/engine", day) for i, day in enumerate(days[:5])]
    cases += [_case(99, "no date at all", "acme/trainer")]
    data = _embedded(cases)
    data.vectors[7] = data.vectors[9]  # #7 copies #9, a test record: it leaves the case base
    [split], info = temporal_split(data, _embedded([]), threshold=0.95)
    assert {c.id for c in split.test} == {"acme/trainer#8", "acme/trainer#9", "acme/engine#4"}
    trained = {c.id for c in split.train}
    assert "acme/trainer#7" not in trained and "acme/trainer#99" in trained
    assert len(trained) == len(cases) - 3 - 1
    newest_trained = max(c.created_at for c in split.train if c.repo == "acme/trainer" and c.created_at)
    assert newest_trained < min(c.created_at for c in split.test if c.repo == "acme/trainer" and c.created_at)
    assert info["first_tested_day"] == {"acme/engine": "2022-01-05", "acme/trainer": "2022-01-09"}
    assert info["undated_records_train_only"] == 1


def test_the_temporal_task_is_defined_beside_the_folds(gold_dir: Path) -> None:
    config = task_config(load_task("ddl-dev-temporal"), gold_dir, llm_configured=False)
    assert config.fold_by == "time" and config.text == "opened" and config.pool
    assert config.datasets == tuple(gold_dir / n for n in ("ddl-dev.jsonl", "ddl-dev-r3.jsonl", "ddl-dev-r4.jsonl"))


def test_the_case_base_learns_from_the_opening_posts_when_told() -> None:
    cases = [_case(1, THREAD), _case(2, MID_THREAD)]
    assert case_base_text(cases, "thread") == cases
    opened, mid_thread = case_base_text(cases, "opened")
    assert opened.body == OPENING and opened.created_at == datetime(2023, 4, 2, tzinfo=UTC)
    assert mid_thread == cases[1]  # no opening post: the window still trains


def test_an_engine_fitted_on_opening_posts_never_reads_the_later_comments(settings: Settings, engine: Engine) -> None:
    cases = [_case(i, THREAD.replace("step 10", f"step {i}")) for i in range(6)] + [_case(9, MID_THREAD)]
    assert settings.case_text == "opened"  # the default: the case base learns from what the App will see
    opened = fit_engine(settings, cases, embedder=engine.embedder, predictor_name="knn", calibrate=False,
                        use_cache=False)
    assert not any("NCCL timeout" in text for text in opened.training.texts)
    assert sum("driver" in text for text in opened.training.texts) == 1  # the mid-thread window
    whole = fit_engine(settings.model_copy(update={"case_text": "thread"}), cases, embedder=engine.embedder,
                       predictor_name="knn", calibrate=False, use_cache=False)
    assert all("NCCL timeout" in text for text in whole.training.texts[:6])


def test_a_benchmark_says_what_its_case_bases_learned_from(settings: Settings, gold_dir: Path) -> None:
    def train_text_of(train_text: str | None) -> str | None:
        return build_config(settings, task="ddl-dev-cv", dataset=None, extra_cases=None, no_extra_cases=False,
                            train_on=None, predictors=None, folds=None, seed=None, bootstrap=None, fit_cache=True,
                            train_text=train_text).train_text

    assert train_text_of(None) is None  # the setting decides (DDL_TRIAGE_CASE_TEXT)
    assert train_text_of("opened") == "opened"
    with pytest.raises(ConfigError, match="--train-text: Input should be 'opened' or 'thread'"):
        train_text_of("comments")


def test_calibration_groups_threads_by_the_links_in_their_later_comments(settings: Settings, engine: Engine,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import bot.models.engine as engine_module

    seen: list[list[Case]] = []
    real = engine_module.linked_pairs

    def spy(cases: list[Case]) -> list[tuple[int, int]]:
        seen.append(list(cases))
        return real(cases)

    monkeypatch.setattr(engine_module, "linked_pairs", spy)
    linked = f"{OPENING}\n\nmaintainer · comment · 2023-04-05\nDuplicate of #3, closing."
    cases = [_case(i, linked.replace("step 10", f"step {i}")) for i in range(12)]
    fitted = fit_engine(settings, cases, embedder=engine.embedder, predictor_name="knn", use_cache=False)
    assert not any("Duplicate" in text for text in fitted.training.texts)  # it learns from the opening posts
    assert seen and all("Duplicate of #3" in c.body for c in seen[0])  # and groups by the whole threads
