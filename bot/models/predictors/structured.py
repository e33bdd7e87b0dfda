"""`linear-fused` with two more views, each fused only on the axes it speaks to:

- **cues** (bot/reading/cues.py): the title's question words and template tags, how the body phrases a question, a
  request or a docs report, and the kind of issue template it followed; a logistic regression per axis on these
  0/1 columns, fused on **kind** (what sort of report it is).
- **structure** (bot/knowledge/stages.py): the failure's structure (the phases of the run on the traceback's frames, the
  innermost one, the deepest framework frame, the exception class, exit code, signal, shared signature digests,
  whether any failure is shown, the prose's phase phrases); fused on **kind, stage and symptom**.

Root cause and fix pattern keep `linear-fused`'s four views. Optionally (off here: it lost, README "Accuracy"),
joint decoding of kind, stage and symptom with label-pair compatibility tables (bot/models/joint.py).
Chosen by the paired table against `linear-fused` on the task's repeated, grouped folds (README, "Accuracy").
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression

from bot.core.domain import Issue
from bot.core.settings import AXES, Settings
from bot.knowledge.stages import StructureVocabulary
from bot.models.joint import JOINT_AXES, JointDecoder
from bot.models.predictors.base import (
    Arrays,
    AxisDistributions,
    Meta,
    PerAxisModels,
    Query,
    State,
    TrainingSet,
    register,
)
from bot.models.predictors.fused import VIEWS, FusedLinearPredictor, fuse
from bot.reading.cues import cue_flags
from bot.reading.normalise import NormalisedIssue, normalise

EXTRA_C = 1.0  # the extra views hold few, strong 0/1 columns: a stronger prior than the n-gram views' C
EXTRA_VIEWS = ("cues", "structure")
# Each extra view where it speaks: the cues say what kind of report it is, the failure's structure where and how
# the run failed (bench/label_views.py measures the alternatives).
AXIS_VIEWS: dict[str, tuple[str, ...]] = {"kind": ("cues", "structure"), "stage": ("structure",),
                                          "symptom": ("structure",)}


class StructuredPredictor(FusedLinearPredictor):
    """The four fused views, plus the cue and structure views on the axes they speak to."""

    name = "linear-structured"

    def __init__(self, c: float = 2.0, flag_weight: float = 0.5, axis_views: Mapping[str, tuple[str, ...]] = AXIS_VIEWS,
                 strength: float = 0.0, smoothing: float = 1.0, reward: bool = True, name: str | None = None) -> None:
        super().__init__(c, flag_weight)
        self.axis_views = {axis: tuple(v for v in EXTRA_VIEWS if v in views) for axis, views in axis_views.items()}
        self.extra_views = tuple(v for v in EXTRA_VIEWS if any(v in views for views in self.axis_views.values()))
        self._vocabulary = StructureVocabulary()
        self._decoder = JointDecoder(strength, smoothing, reward)
        self.name = name or self.name

    def _issues_matrices(self, vectors: np.ndarray, issues: list[NormalisedIssue]) -> dict[str, sparse.csr_matrix]:
        matrices = self.view_matrices(vectors, [i.text for i in issues], [i.title for i in issues])
        if "cues" in self.extra_views:
            matrices["cues"] = sparse.csr_matrix(cue_flags([i.title for i in issues], [i.templates for i in issues],
                                                           [i.body for i in issues]))
        if "structure" in self.extra_views:
            matrices["structure"] = self._vocabulary.transform(issues)
        return matrices

    def unfitted_models(self) -> dict[str, PerAxisModels]:
        models = super().unfitted_models()
        for view in self.extra_views:
            models[view] = PerAxisModels(LogisticRegression(C=EXTRA_C, max_iter=3000, class_weight="balanced"))
        return models

    def fit(self, data: TrainingSet) -> None:
        # The training set keeps texts, not the normalised issues the cues read: normalise the cases again.
        issues = [normalise(Issue(title=c.title, body=c.body, repo=c.repo)) for c in data.index.cases]
        self.fit_vectorizers(data.texts, [i.title for i in issues])
        self._vocabulary = StructureVocabulary.fit(issues) if "structure" in self.extra_views else \
            StructureVocabulary()
        matrices = self._issues_matrices(data.index.vectors, issues)
        self._models = self.unfitted_models()
        for view, models in self._models.items():
            models.fit(data, matrices[view])
            models.round_trip(f"{view}.")
        self._decoder.fit(data)
        self._decoder.round_trip()

    def view_distributions(self, queries: list[Query]) -> dict[str, list[AxisDistributions]]:
        """Each view's own distributions, before fusion and decoding (for measuring combinations)."""
        matrices = self._issues_matrices(np.vstack([q.vector for q in queries]), [q.issue for q in queries])
        return {view: models.predict(matrices[view], len(queries)) for view, models in self._models.items()}

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        if not queries:
            return []
        views = self.view_distributions(queries)
        fused = [{axis: fuse([views[v][i][axis] for v in (*VIEWS, *self.axis_views.get(axis, ()))]) for axis in AXES}
                 for i in range(len(queries))]
        return [self._decoder.decode(dist) for dist in fused]

    @property
    def decoder(self) -> JointDecoder:
        return self._decoder

    def state(self) -> State:
        arrays, meta = super().state()
        joint_arrays, meta["joint"] = self._decoder.state()
        meta["structure_terms"] = self._vocabulary.terms
        return {**arrays, **joint_arrays}, meta

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        super().restore(arrays, meta, data)
        self._decoder.restore(arrays, meta["joint"])
        self._vocabulary = StructureVocabulary(meta["structure_terms"])

    def describe(self) -> dict[str, object]:
        decoder = self._decoder
        return {**super().describe(), "name": self.name, "views": [*VIEWS, *self.extra_views],
                "axis_views": {axis: list(v) for axis, v in sorted(self.axis_views.items())},
                "extra_C": EXTRA_C,
                "joint": {"axes": list(JOINT_AXES), "strength": decoder.strength, "smoothing": decoder.smoothing,
                          "reward": decoder.reward}}


@register("linear-structured")
def _linear_structured(settings: Settings) -> StructuredPredictor:
    return StructuredPredictor()
