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
from bot.joint import JointDecoder
from bot.normalise import NormalisedIssue, normalise
from bot.predictors.base import (
    Arrays,
    AxisDistributions,
    Meta,
    PerAxisModels,
    Query,
    State,
    TrainingSet,
    register,
)
from bot.predictors.fused import FusedLinearPredictor
from bot.settings import Settings
from bot.stages import StructureVocabulary

STRUCTURE_C = 1.0  # few, strong 0/1 columns: a stronger prior than the n-gram views' C


class JointFusedPredictor(FusedLinearPredictor):
    """The four fused views, cue columns in the title and word views, and joint decoding of the first axes."""

    name = "linear-joint"

    def __init__(self, c: float = 2.0, flag_weight: float = 0.5, cue_weight: float = 1.0, strength: float = 1.0,
                 smoothing: float = 1.0, reward: bool = True, structure: bool = False, name: str | None = None
                 ) -> None:
        super().__init__(c, flag_weight)
        self.cue_weight, self.structure = cue_weight, structure
        self._vocabulary = StructureVocabulary()
        self._decoder = JointDecoder(strength, smoothing, reward)
        self.name = name or self.name

    def _issues_matrices(self, vectors: np.ndarray, issues: list[NormalisedIssue]) -> dict[str, sparse.csr_matrix]:
        matrices = self._matrices(vectors, [i.text for i in issues], [i.title for i in issues])
        if self.cue_weight:
            cues = sparse.csr_matrix(cue_flags([i.title for i in issues], [i.templates for i in issues])
                                     * self.cue_weight)
            for view in ("title", "words"):
                matrices[view] = sparse.hstack([matrices[view], cues], format="csr")
        if self.structure:
            cues = sparse.csr_matrix(cue_flags([i.title for i in issues], [i.templates for i in issues]))
            matrices["structure"] = sparse.hstack([cues, self._vocabulary.transform(issues)], format="csr")
        return matrices

    def _unfitted_models(self) -> dict[str, PerAxisModels]:
        models = super()._unfitted_models()
        if self.structure:
            models["structure"] = PerAxisModels(LogisticRegression(C=STRUCTURE_C, max_iter=3000,
                                                                   class_weight="balanced"))
        return models

    def fit(self, data: TrainingSet) -> None:
        # The training set keeps texts, not the normalised issues the cues read: normalise the cases again.
        issues = [normalise(Issue(title=c.title, body=c.body, repo=c.repo)) for c in data.index.cases]
        self._fit_vectorizers(data.texts, [i.title for i in issues])
        self._vocabulary = StructureVocabulary.fit(issues) if self.structure else StructureVocabulary()
        matrices = self._issues_matrices(data.index.vectors, issues)
        self._models = self._unfitted_models()
        for view, models in self._models.items():
            models.fit(data, matrices[view])
            models.round_trip(f"{view}.")
        self._decoder.fit(data)
        self._decoder.round_trip()

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        if not queries:
            return []
        matrices = self._issues_matrices(np.vstack([q.vector for q in queries]), [q.issue for q in queries])
        return [self._decoder.decode(dist) for dist in self._fuse_views(matrices, len(queries))]

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
        return {**super().describe(), "name": self.name, "cues": "title and template cues in title and word views",
                "cue_weight": self.cue_weight, "structure": self.structure, "joint": {"axes": "kind, stage, symptom",
                                                         "strength": self._decoder.strength,
                                                         "smoothing": self._decoder.smoothing,
                                                         "reward": self._decoder.reward}}


@register("linear-joint")
def _linear_joint(settings: Settings) -> JointFusedPredictor:
    return JointFusedPredictor()
