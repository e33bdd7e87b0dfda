"""No look into the future: given when an issue was opened, no case opened on that day or later is retrieved,
shown, shares a signature or votes, in the engine (`predict`), in a benchmark job and in the case pack."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from bot.core.domain import Case, Issue
from bot.core.settings import Settings
from bot.knowledge.taxonomy import Taxonomy
from bot.models.engine import Engine, fit_engine
from bot.models.pack import Pack, build_pack, engine_from_pack, load_pack
from bot.models.retrieval import CaseIndex
from bot.reading.signatures import error_signatures
from eval.jobs import Job, run_job
from eval.splits import Split

EARLY, MIDDLE, LATE = (datetime(year, 6, 1, tzinfo=UTC) for year in (2021, 2022, 2023))
OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _index(dates: list[datetime | None]) -> CaseIndex:
    cases = [Case(id=f"o/r#{i}", labels={"symptom": "hang_timeout"}, created_at=d) for i, d in enumerate(dates)]
    vectors = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (len(dates), 1))
    signature = tuple(s.digest for s in error_signatures(OOM))
    return CaseIndex(cases, vectors, [signature] * len(dates))


def test_nearest_keeps_only_cases_opened_strictly_before_the_query() -> None:
    index = _index([EARLY, MIDDLE, LATE, None])
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    assert [j for j, _ in index.nearest(query, 10)[0]] == [0, 1, 2, 3]  # no date given: everything
    assert [j for j, _ in index.nearest(query, 10, before=[MIDDLE])[0]] == [0]  # same day, later, unknown: out
    assert index.nearest(query, 10, before=[EARLY])[0] == []
    assert [j for j, _ in index.nearest(query, 10, [{"o/r#0"}], before=[LATE])[0]] == [1]


def test_a_later_case_sharing_the_issues_signature_is_not_shown() -> None:
    index = _index([EARLY, LATE])
    signatures = error_signatures(OOM)
    assert set(index.sharing(signatures)) == {0, 1}
    assert set(index.sharing(signatures, before=MIDDLE)) == {0}
    shown = index.related(np.array([1.0, 0.0], dtype=np.float32), [], signatures, before=MIDDLE)
    assert [n.id for n in shown] == ["o/r#0"]


def _case(number: int, symptom: str, body: str, opened: datetime) -> Case:
    return Case(id=f"acme/trainer#{number}", repo="acme/trainer", title=f"report {number}", body=body,
                created_at=opened, type="issue",
                labels={"kind": "bug_report", "stage": "training", "symptom": symptom})


# Text written for this test: two reports of the same failure, the later one labelled differently, plus filler.
SAME = ("All ranks block forever inside the gradient all-reduce after step 41; py-spy shows every worker waiting "
        "on the process group barrier and nothing is printed any more")
FILLER = ["Building the fused Adam extension fails because nvcc is not found on the PATH",
          "The tokenizer pads on the wrong side, so the labels shift by one position in every batch",
          "Loading the converted checkpoint reports missing keys for every attention layer",
          "Throughput drops by half when activation checkpointing is switched on for the last blocks"]


@pytest.fixture(scope="module")
def dated_cases() -> list[Case]:
    return [_case(1, "hang_timeout", SAME, EARLY), _case(2, "communication_error", SAME, LATE),
            *[_case(10 + i, "installation_build_failure", text, EARLY) for i, text in enumerate(FILLER)]]


@pytest.fixture(scope="module")
def knn_engine(settings: Settings, engine: Engine, dated_cases: list[Case]) -> Engine:
    return fit_engine(settings, dated_cases, embedder=engine.embedder, predictor_name="knn", calibrate=False,
                      use_cache=False)


def test_the_engine_retrieves_shows_and_votes_only_with_earlier_cases(knn_engine: Engine) -> None:
    issue = Issue(id="acme/trainer#99", repo="acme/trainer", title="report 99", body=SAME)
    timeless = knn_engine.triage(issue)
    assert "acme/trainer#2" in {n.id for n in timeless.neighbours}
    dated = knn_engine.triage(issue.model_copy(update={"created_at": MIDDLE}))
    assert "acme/trainer#2" not in {n.id for n in dated.neighbours}
    assert "acme/trainer#1" in {n.id for n in dated.neighbours}
    top = dict(dated.predictions["symptom"].top)
    assert top.get("hang_timeout", 0.0) > top.get("communication_error", 0.0)  # the later case never votes
    before_all = knn_engine.triage(issue.model_copy(update={"created_at": EARLY}))
    assert before_all.neighbours == []


def test_a_benchmark_job_never_lets_a_later_case_vote(settings: Settings, dated_cases: list[Case]) -> None:
    test = Case(id="acme/trainer#50", repo="acme/trainer", title="report 50", body=SAME, created_at=MIDDLE,
                labels={"symptom": "hang_timeout"})
    split = Split(fold=0, train=dated_cases, test=[test])
    output = run_job(Job("knn", split, settings, {test.id: "h"}, fit_cache=False, calibrate=False))
    ranked = dict(output.samples[0]["predicted"]["symptom"]["top"])
    assert ranked.get("hang_timeout", 0.0) > ranked.get("communication_error", 0.0)


@pytest.fixture(scope="module")
def built(engine: Engine, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Pack:
    return build_pack(settings, tmp_path_factory.mktemp("pack") / "ddl-v1.npz")


def test_the_pack_records_each_cases_opening_date(built: Pack, engine: Engine, taxonomy: Taxonomy) -> None:
    assert [c.created_at for c in built.cases] == [c.created_at for c in engine.index.cases]
    assert sum(c.created_at is not None for c in built.cases) > len(built.cases) // 2
    assert all(c.created_at is None or c.created_at.tzinfo is not None for c in load_pack(built.path).cases)


def test_predict_on_the_pack_shows_no_case_opened_after_the_issue(built: Pack, settings: Settings) -> None:
    served = engine_from_pack(settings.model_copy(update={"data_dir": None}), built, "default")
    opened = {c.id: c.created_at for c in served.index.cases}
    dates = sorted(d for d in opened.values() if d is not None)
    cut = dates[len(dates) // 2]
    issue = Issue(title="ZeRO-3 run hangs in all-reduce", body=f"{SAME}\n{OOM}", created_at=cut)
    result = served.triage(issue)
    assert result.neighbours
    assert all((day := opened[n.id]) is not None and day < cut for n in result.neighbours)
    later_shown = served.triage(issue.model_copy(update={"created_at": None})).neighbours
    assert any((day := opened[n.id]) is None or day >= cut for n in later_shown)  # the filter did something


def test_an_undated_correction_of_a_maintainer_is_known_to_every_later_triage() -> None:
    index = _index([EARLY, None])
    index.cases[1] = index.cases[1].model_copy(update={"source_file": "feedback"})  # a correction: no date
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    assert [j for j, _ in index.nearest(query, 10, before=[MIDDLE])[0]] == [0, 1]
    assert [j for j, _ in index.nearest(query, 10, before=[EARLY])[0]] == [1]
