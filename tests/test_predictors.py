from __future__ import annotations

import numpy as np
import pytest

from bot.core.domain import Case
from bot.core.errors import PredictorError
from bot.core.settings import AXES, Settings
from bot.knowledge.taxonomy import Taxonomy
from bot.models.predictors.base import AxisDistributions, Predictor, Query, TrainingSet, make_predictor, predictor_names
from bot.models.predictors.fused import FusedLinearPredictor, fuse
from bot.models.predictors.knn import KnnPredictor
from bot.models.predictors.linear import LinearPredictor
from bot.models.predictors.structured import StructuredPredictor
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import normalise

LABELS = {"oom": ("out_of_memory", "distributed_feature_tuning"), "hang": ("hang_timeout", "communication_tuning")}


def _toy(taxonomy: Taxonomy, n: int = 12) -> TrainingSet:
    """Two well-separated groups of made-up cases on orthogonal unit vectors."""
    cases, vectors, texts = [], [], []
    for i in range(n):
        kind = "oom" if i % 2 else "hang"
        symptom, fix = LABELS[kind]
        text = "CUDA out of memory on rank 0" if kind == "oom" else "collective timeout, the job hangs"
        labels = {"kind": "bug_report", "stage": "training", "symptom": symptom, "root_cause": "unknown",
                  "fix_pattern": fix}
        cases.append(Case(id=f"t#{i}", title=text, body="", url=f"https://github.com/t/t/issues/{i}",
                          labels=labels))
        vec = np.zeros(4, dtype=np.float32)
        vec[0 if kind == "oom" else 1] = 1.0
        vec[2] = 0.01 * i
        vectors.append(vec / np.linalg.norm(vec))
        texts.append(text)
    return TrainingSet.build(CaseIndex(cases, np.vstack(vectors)), texts, taxonomy, use_silver=True)


def _query(data: TrainingSet, text: str, vec: list[float]) -> Query:
    v = np.array(vec, dtype=np.float32)
    return Query(issue=normalise(Case(title=text)), vector=v, hits=data.index.nearest(v[None, :], 5)[0])


def test_an_unknown_predictor_name_lists_the_known_ones() -> None:
    with pytest.raises(PredictorError, match=r"unknown predictor 'magic'.*'default'.*'knn'.*'linear'"):
        make_predictor("magic", Settings())
    assert {"majority", "tfidf", "knn", "linear", "default", "llm"} <= set(predictor_names())


def fit_and_predict_oom_and_hang(predictor: Predictor, taxonomy: Taxonomy) -> list[AxisDistributions]:
    """Fit on the toy case base, then predict an OOM-like and a hang-like query."""
    data = _toy(taxonomy)
    predictor.fit(data)
    return predictor.predict_proba([_query(data, "CUDA out of memory on rank 0", [1, 0, 0, 0]),
                                    _query(data, "collective timeout, the job hangs", [0, 1, 0, 0])])


@pytest.mark.parametrize("predictor", [KnnPredictor(k=5), LinearPredictor(), FusedLinearPredictor(),
                                       StructuredPredictor()],
                         ids=["knn", "linear", "linear-fused", "linear-structured"])
def test_predictors_recover_separable_labels(taxonomy: Taxonomy, predictor) -> None:  # type: ignore[no-untyped-def]
    oom, hang = fit_and_predict_oom_and_hang(predictor, taxonomy)
    assert max(oom["symptom"], key=oom["symptom"].get) == "out_of_memory"
    assert max(hang["fix_pattern"], key=hang["fix_pattern"].get) == "communication_tuning"
    for dist in (oom, hang):
        assert set(dist) == set(AXES)
        assert abs(sum(dist["symptom"].values()) - 1) < 1e-6
        assert set(dist["symptom"]) == set(taxonomy.predictable("symptom"))


def test_not_established_labels_never_become_training_targets(taxonomy: Taxonomy) -> None:
    data = _toy(taxonomy)
    assert set(data.targets["root_cause"]) == {None}
    assert "unresolved" not in taxonomy.predictable("fix_pattern")


def test_silver_guesses_teach_only_when_allowed(taxonomy: Taxonomy) -> None:
    case = Case(id="s", labels={"root_cause": "unknown"}, silver={"root_cause": "api_misuse"})
    index = CaseIndex([case], np.ones((1, 2), dtype=np.float32))
    assert TrainingSet.build(index, [""], taxonomy, use_silver=True).targets["root_cause"] == ["api_misuse"]
    assert TrainingSet.build(index, [""], taxonomy, use_silver=False).targets["root_cause"] == [None]


@pytest.mark.parametrize("name", ["linear", "linear-title", "linear-fused", "linear-structured", "default",
                                  "linear-without-r3"])
def test_a_stored_predictor_predicts_exactly_as_the_fitted_one(taxonomy: Taxonomy, name: str) -> None:
    from eval import predictors as _eval_predictors  # noqa: F401  (registers linear-without-r3)

    data = _toy(taxonomy, n=16)
    fitted = make_predictor(name, Settings())
    fitted.fit(data)
    restored = make_predictor(name, Settings())
    restored.restore(*fitted.state(), data)
    queries = [_query(data, "CUDA out of memory on rank 0", [1, 0, 0, 0]),
               _query(data, "collective timeout, the job hangs", [0, 1, 0, 0])]
    assert restored.predict_proba(queries) == fitted.predict_proba(queries)
    assert max(fitted.predict_proba(queries)[0]["symptom"].items(), key=lambda kv: kv[1])[0] == "out_of_memory"


def test_fused_views_a_label_that_one_view_rules_out_loses_to_one_all_views_allow() -> None:
    # Averaged, `a` would win (0.5 vs 0.45); multiplied, the view that all but rules it out decides.
    words = {"a": 0.99, "b": 0.01 - 1e-6, "c": 1e-6}
    title = {"a": 0.001, "b": 0.899, "c": 0.10}
    fused = fuse([words, title])
    assert max(fused, key=lambda label: fused[label]) == "b"
    assert abs(sum(fused.values()) - 1) < 1e-9
    assert fuse([words]) == pytest.approx(words)


def test_the_structured_views_leave_root_cause_and_fix_pattern_as_linear_fused_has_them(taxonomy: Taxonomy) -> None:
    data = _toy(taxonomy, n=16)
    queries = [_query(data, "CUDA out of memory on rank 0", [1, 0, 0, 0]),
               _query(data, "How to avoid the collective timeout? The job hangs", [0, 1, 0, 0])]
    fused, structured = FusedLinearPredictor(), StructuredPredictor()
    fused.fit(data)
    structured.fit(data)
    for mine, theirs in zip(structured.predict_proba(queries), fused.predict_proba(queries), strict=True):
        assert mine["root_cause"] == theirs["root_cause"] and mine["fix_pattern"] == theirs["fix_pattern"]
    views = structured.view_distributions(queries)
    assert set(views) == {"embedding", "words", "title", "chars", "cues", "structure"}


def _traceback(function: str, error: str) -> str:
    return ("```\nTraceback (most recent call last):\n"
            '  File "/venv/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 1822, in '
            f"{function}\n    result = self.module(*inputs)\n{error}\n```")


# Reports whose kind only the cues tell apart, and whose stage only the traceback's frames tell apart: the text of
# every bug report is the same but for the function of its innermost frame.
CUE_AND_STRUCTURE_CASES = {
    "bug, in forward": ("[BUG] DeepSpeed run fails with a RuntimeError", _traceback("forward", "RuntimeError: bad"),
                        {"kind": "bug_report", "stage": "training"}),
    "bug, in from_pretrained": ("[BUG] DeepSpeed run fails with a RuntimeError",
                                _traceback("from_pretrained", "RuntimeError: bad"),
                                {"kind": "bug_report", "stage": "data_model_preparation"}),
    "question": ("How can I run DeepSpeed with this?", "Is there a way to do it? Any suggestions?",
                 {"kind": "usage_question", "stage": None}),
}


def _cue_and_structure_toy(taxonomy: Taxonomy) -> TrainingSet:
    """The cases above, four of each, on one and the same embedding vector (the embedding tells nothing)."""
    cases = [Case(id=f"v#{n}", title=title, body=body, url=f"https://github.com/v/v/issues/{n}", labels=labels)
             for n, (title, body, labels) in enumerate(v for _ in range(4) for v in CUE_AND_STRUCTURE_CASES.values())]
    texts = [normalise(c).text for c in cases]
    vectors = np.tile(np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32), (len(cases), 1))
    return TrainingSet.build(CaseIndex(cases, vectors), texts, taxonomy, use_silver=True)


def test_the_cue_and_structure_views_learn_what_only_they_can_read(taxonomy: Taxonomy) -> None:
    """The cue view tells a question from a bug report by its title and phrasing; the structure view tells the
    stage by the innermost frame's function; and the fused prediction follows them on the axes they speak to."""
    data = _cue_and_structure_toy(taxonomy)
    predictor = StructuredPredictor()
    predictor.fit(data)
    queries = [Query(issue=normalise(Case(title=title, body=body)), vector=data.index.vectors[0],
                     hits=data.index.nearest(data.index.vectors[:1], 5)[0])
               for title, body, _ in CUE_AND_STRUCTURE_CASES.values()]
    views = predictor.view_distributions(queries)
    fused = predictor.predict_proba(queries)
    expected = [labels for _, _, labels in CUE_AND_STRUCTURE_CASES.values()]

    def top(dist: dict[str, float]) -> tuple[str, float]:
        return max(dist.items(), key=lambda kv: kv[1])

    for case, cues, structure, prediction, labels in zip(CUE_AND_STRUCTURE_CASES, views["cues"], views["structure"],
                                                        fused, expected, strict=True):
        label, p = top(cues["kind"])
        assert (label, p > 0.6) == (labels["kind"], True), (case, cues["kind"])
        assert top(prediction["kind"])[0] == labels["kind"], case
        if labels["stage"]:
            label, p = top(structure["stage"])
            assert (label, p > 0.6) == (labels["stage"], True), (case, structure["stage"])
            assert top(prediction["stage"])[0] == labels["stage"], case
