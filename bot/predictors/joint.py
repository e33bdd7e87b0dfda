"""`linear-fused` with the cues a maintainer reads first, and kind, stage and symptom decided together.

- **Cues** (bot/cues.py): the title's question words and template tags and the kind of issue template the body
  followed, as 0/1 columns beside the title's character n-grams and beside the word n-grams.
- **Structure** (bot/stages.py): a fifth view, its own logistic regression per axis on the cues and the failure's
  structure (the phases of the run on the traceback, the innermost one, the deepest framework frame, the
  exception class, exit code, signal and shared signature digests).
- **Joint decoding** (bot/joint.py): the fused distributions of kind, stage and symptom multiplied by the
  label-pair compatibility tables learned on the training cases; each axis takes its marginal.

Measured against `linear-fused` on the task's repeated, grouped folds (README, "Accuracy").
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression

from bot.cues import cue_flags
from bot.domain import Issue
from bot.joint import JOINT_AXES, JointDecoder
from bot.normalise import NormalisedIssue, normalise
from bot.predictors.base import (
    Arrays,
    AxisDistributions,
    Meta,
    PerAxisModels,
    Query,
    State,
    TrainingSet,
    normalise_distribution,
    register,
)
from bot.predictors.fused import FLOOR, VIEWS, FusedLinearPredictor
from bot.settings import AXES, Settings
from bot.stages import StructureVocabulary

EXTRA_C = 1.0  # the extra views hold few, strong 0/1 columns: a stronger prior than the n-gram views' C
EXTRA_VIEWS = ("cues", "structure")


class JointFusedPredictor(FusedLinearPredictor):
    """The four fused views, optional cue and structure views, and joint decoding of kind, stage and symptom."""

    name = "linear-joint"

    def __init__(self, c: float = 2.0, flag_weight: float = 0.5, cue_weight: float = 0.0,
                 extra_views: tuple[str, ...] = EXTRA_VIEWS, extra_weight: float | None = None,
                 strength: float = 1.0, smoothing: float = 1.0, reward: bool = True, name: str | None = None) -> None:
        super().__init__(c, flag_weight)
        self.cue_weight = cue_weight  # > 0: the cue columns also join the title and word views
        self.extra_views = tuple(v for v in EXTRA_VIEWS if v in extra_views)
        self.extra_weight = extra_weight  # None: one geometric mean over all views; else see fuse_weighted
        self._vocabulary = StructureVocabulary()
        self._decoder = JointDecoder(strength, smoothing, reward)
        self.name = name or self.name

    def _issues_matrices(self, vectors: np.ndarray, issues: list[NormalisedIssue]) -> dict[str, sparse.csr_matrix]:
        matrices = self._matrices(vectors, [i.text for i in issues], [i.title for i in issues])
        cues = sparse.csr_matrix(cue_flags([i.title for i in issues], [i.templates for i in issues],
                                           [i.body for i in issues]))
        if self.cue_weight:
            for view in ("title", "words"):
                matrices[view] = sparse.hstack([matrices[view], cues * self.cue_weight], format="csr")
        if "cues" in self.extra_views:
            matrices["cues"] = cues
        if "structure" in self.extra_views:
            matrices["structure"] = self._vocabulary.transform(issues)
        return matrices

    def _unfitted_models(self) -> dict[str, PerAxisModels]:
        models = super()._unfitted_models()
        for view in self.extra_views:
            models[view] = PerAxisModels(LogisticRegression(C=EXTRA_C, max_iter=3000, class_weight="balanced"))
        return models

    def fit(self, data: TrainingSet) -> None:
        # The training set keeps texts, not the normalised issues the cues read: normalise the cases again.
        issues = [normalise(Issue(title=c.title, body=c.body, repo=c.repo)) for c in data.index.cases]
        self._fit_vectorizers(data.texts, [i.title for i in issues])
        self._vocabulary = StructureVocabulary.fit(issues) if "structure" in self.extra_views else \
            StructureVocabulary()
        matrices = self._issues_matrices(data.index.vectors, issues)
        self._models = self._unfitted_models()
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
        matrices = self._issues_matrices(np.vstack([q.vector for q in queries]), [q.issue for q in queries])
        if self.extra_weight is None:
            fused = self._fuse_views(matrices, len(queries))
        else:
            views = {view: models.predict(matrices[view], len(queries)) for view, models in self._models.items()}
            fused = [{axis: fuse_weighted([views[v][i][axis] for v in VIEWS],
                                          [views[v][i][axis] for v in self.extra_views], self.extra_weight)
                      for axis in AXES} for i in range(len(queries))]
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
                "cue_weight": self.cue_weight, "extra_C": EXTRA_C, "extra_weight": self.extra_weight,
                "joint": {"axes": list(JOINT_AXES), "strength": decoder.strength, "smoothing": decoder.smoothing,
                          "reward": decoder.reward}}


def fuse_weighted(base: list[dict[str, float]], extra: list[dict[str, float]], weight: float) -> dict[str, float]:
    """The base views' geometric mean times each extra view raised to `weight`, renormalised: at weight 1 an extra
    view is evidence of its own (a likelihood ratio on top of the base), not one vote among the n-gram views."""
    labels = tuple(base[0])
    logs = np.mean([[np.log(max(d[label], FLOOR)) for label in labels] for d in base], axis=0)
    for dist in extra:
        logs = logs + weight * np.log(np.maximum([dist[label] for label in labels], FLOOR))
    scores = np.exp(logs - logs.max())
    return normalise_distribution(dict(zip(labels, scores.tolist(), strict=True)), labels)


@register("linear-joint")
def _linear_joint(settings: Settings) -> JointFusedPredictor:
    return JointFusedPredictor()
