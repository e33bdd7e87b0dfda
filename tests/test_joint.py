"""Joint decoding of kind, stage and symptom with the compatibility tables learned on the gold cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.knowledge.dataset import LoadReport, default_case_files, load_case_base
from bot.knowledge.taxonomy import Taxonomy
from bot.models.joint import JointDecoder, compatibility
from bot.models.predictors.base import AxisDistributions, TrainingSet
from bot.models.retrieval import CaseIndex

UNSEEN = ("environment_setup", "numerical_instability")  # no gold case pairs these two


@pytest.fixture(scope="module")
def decoder(gold_dir: Path, taxonomy: Taxonomy) -> JointDecoder:
    # The tables read only the cases' labels; the vectors play no part in them.
    cases = load_case_base(default_case_files(gold_dir), taxonomy, LoadReport())
    data = TrainingSet.build(CaseIndex(cases, np.zeros((len(cases), 1), dtype=np.float32)), [""] * len(cases),
                             taxonomy, use_silver=True)
    assert UNSEEN not in set(zip(data.targets["stage"], data.targets["symptom"], strict=True))
    fitted = JointDecoder(strength=1.0, smoothing=1.0)
    fitted.fit(data)
    return fitted


def _dist(taxonomy: Taxonomy, stage: dict[str, float], symptom: dict[str, float]) -> AxisDistributions:
    def spread(axis: str, given: dict[str, float]) -> dict[str, float]:
        labels = taxonomy.predictable(axis)
        rest = (1.0 - sum(given.values())) / (len(labels) - len(given))
        return {label: given.get(label, rest) for label in labels}

    return {"kind": spread("kind", {"bug_report": 0.9}), "stage": spread("stage", stage),
            "symptom": spread("symptom", symptom), "root_cause": {"unknown_cause": 1.0}}


def _top(dist: dict[str, float]) -> str:
    return max(dist.items(), key=lambda item: item[1])[0]


def test_an_unseen_pair_wins_only_when_both_axes_are_confident(decoder: JointDecoder, taxonomy: Taxonomy) -> None:
    stage, symptom = UNSEEN
    confident = decoder.decode(_dist(taxonomy, {stage: 0.97, "training": 0.01},
                                     {symptom: 0.97, "installation_build_failure": 0.01}))
    assert (_top(confident["stage"]), _top(confident["symptom"])) == UNSEEN

    unsure_symptom = decoder.decode(_dist(taxonomy, {stage: 0.97, "training": 0.01},
                                          {symptom: 0.5, "installation_build_failure": 0.3}))
    assert (_top(unsure_symptom["stage"]), _top(unsure_symptom["symptom"])) == (stage, "installation_build_failure")

    unsure_stage = decoder.decode(_dist(taxonomy, {stage: 0.45, "training": 0.4},
                                        {symptom: 0.97, "installation_build_failure": 0.01}))
    assert (_top(unsure_stage["stage"]), _top(unsure_stage["symptom"])) == ("training", symptom)


def test_a_question_pulls_the_symptom_towards_none(decoder: JointDecoder, taxonomy: Taxonomy) -> None:
    dist = _dist(taxonomy, {"training": 0.9}, {"none": 0.25, "api_exception": 0.45})
    assert _top(decoder.decode(dist)["symptom"]) == "api_exception"
    dist["kind"] = {"bug_report": 0.05, "usage_question": 0.9, "feature_request": 0.03, "documentation": 0.02}
    assert _top(decoder.decode(dist)["symptom"]) == "none"


def test_axes_outside_the_joint_pass_through_and_marginals_sum_to_one(decoder: JointDecoder,
                                                                      taxonomy: Taxonomy) -> None:
    dist = _dist(taxonomy, {"training": 0.6}, {"hang_timeout": 0.5})
    out = decoder.decode(dist)
    assert out["root_cause"] == dist["root_cause"]
    for axis in ("kind", "stage", "symptom"):
        assert sum(out[axis].values()) == pytest.approx(1.0)


def test_compatibility_is_zero_where_no_case_speaks_and_negative_for_unseen_pairs() -> None:
    table = compatibility(np.array([[10.0, 0.0, 0.0], [0.0, 10.0, 0.0]]), smoothing=1.0)
    assert table[0, 0] > 0 and table[0, 1] < 0
    assert (table[:, 2] == 0).all()
