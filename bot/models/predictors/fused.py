"""Late fusion: one logistic regression per view of the issue, combined as a product of experts.

`linear-title` learns one model on all features stacked; the embedding's 384 dense columns then compete with
tens of thousands of sparse n-gram columns under one regularisation. Here each view gets its own model:
the embedding, word n-grams with the error-signature flags, the title's character n-grams, and the whole text's
character n-grams (which catch `ZeRO-3`, `bf16`, `NCCL_TIMEOUT`, exception names). The per-axis distributions
are combined by their geometric mean, so a label wins only when no view rules it out.

Chosen by the paired table of repeated, grouped cross-validation against `linear` (README, "Accuracy").
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from bot.core.settings import AXES, Settings
from bot.models.features import signature_flags
from bot.models.predictors.base import (
    Arrays,
    AxisDistributions,
    Meta,
    PerAxisModels,
    Predictor,
    Query,
    State,
    TrainingSet,
    fit_vectorizer,
    normalise_distribution,
    register,
)

FLOOR = 1e-9  # a view's zero probability would veto a label outright; the floor keeps it a strong vote


def _vectorizers() -> dict[str, TfidfVectorizer]:
    """The n-gram views' vectorizers, unfitted (fit learns the vocabulary; restore sets it)."""
    return {
        "words": TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_df=0.5, sublinear_tf=True, max_features=20000),
        "title": TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=2, sublinear_tf=True,
                                 max_features=20000),
        "chars": TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=2, max_df=0.5, sublinear_tf=True,
                                 max_features=50000),
    }


VIEWS = ("embedding", "words", "title", "chars")


class FusedLinearPredictor(Predictor):
    """Per axis, a balanced logistic regression on each view; their distributions multiplied and renormalised."""

    name = "linear-fused"

    def __init__(self, c: float = 2.0, flag_weight: float = 0.5) -> None:
        self.c, self.flag_weight = c, flag_weight

    def view_matrices(self, vectors: np.ndarray, texts: list[str], titles: list[str]) -> dict[str, sparse.csr_matrix]:
        inputs = {"words": texts, "title": titles, "chars": texts}
        out = {"embedding": sparse.csr_matrix(vectors)}
        for view, vectorizer in self._vectorizers.items():
            out[view] = vectorizer.transform(inputs[view])
        out["words"] = sparse.hstack([out["words"], signature_flags(texts) * self.flag_weight], format="csr")
        return out

    def unfitted_models(self) -> dict[str, PerAxisModels]:
        prototype = LogisticRegression(C=self.c, max_iter=3000, class_weight="balanced")
        return {view: PerAxisModels(prototype) for view in VIEWS}

    def fit_vectorizers(self, texts: list[str], titles: list[str]) -> None:
        self._vectorizers = _vectorizers()
        inputs = {"words": texts, "title": titles, "chars": texts}
        for view, vectorizer in self._vectorizers.items():
            fit_vectorizer(vectorizer, inputs[view])
            vectorizer.idf_ = vectorizer.idf_.astype(np.float32).astype(np.float64)  # as a stored copy holds it

    def fit(self, data: TrainingSet) -> None:
        titles = [case.title or "" for case in data.index.cases]
        self.fit_vectorizers(data.texts, titles)
        matrices = self.view_matrices(data.index.vectors, data.texts, titles)
        self._models = self.unfitted_models()
        for view, models in self._models.items():
            models.fit(data, matrices[view])
            models.round_trip(f"{view}.")  # predict exactly as a stored copy would

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        if not queries:
            return []
        matrices = self.view_matrices(np.vstack([q.vector for q in queries]), [q.issue.text for q in queries],
                                  [q.issue.title for q in queries])
        return self._fuse_views(matrices, len(queries))

    def _fuse_views(self, matrices: dict[str, sparse.csr_matrix], count: int) -> list[AxisDistributions]:
        per_view = [models.predict(matrices[view], count) for view, models in self._models.items()]
        return [{axis: fuse([view[i][axis] for view in per_view]) for axis in AXES} for i in range(count)]

    def state(self) -> State:
        arrays: Arrays = {}
        meta: Meta = {"config": self.describe(), "models": {}, "terms": {}}
        for view, models in self._models.items():
            view_arrays, meta["models"][view] = models.state(f"{view}.")
            arrays.update(view_arrays)
        for view, vectorizer in self._vectorizers.items():
            meta["terms"][view] = [t for t, _ in sorted(vectorizer.vocabulary_.items(), key=lambda item: item[1])]
            arrays[f"{view}.idf"] = vectorizer.idf_.astype(np.float32)
        return arrays, meta

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        self._vectorizers = _vectorizers()
        for view, vectorizer in self._vectorizers.items():
            vectorizer.vocabulary_ = {term: i for i, term in enumerate(meta["terms"][view])}
            vectorizer.idf_ = arrays[f"{view}.idf"].astype(np.float64)
        self._models = self.unfitted_models()
        for view, models in self._models.items():
            models.restore(arrays, meta["models"][view], f"{view}.")

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "views": list(VIEWS), "combine": "geometric mean", "C": self.c,
                "flag_weight": self.flag_weight, "chars": "char_wb 3-5 over the text, 50000 max"}


def fuse(dists: list[dict[str, float]]) -> dict[str, float]:
    """The normalised geometric mean of distributions over the same labels."""
    labels = tuple(dists[0])
    logs = np.mean([[np.log(max(d[label], FLOOR)) for label in labels] for d in dists], axis=0)
    scores = np.exp(logs - logs.max())
    return normalise_distribution(dict(zip(labels, scores.tolist(), strict=True)), labels)



@register("linear-fused")
def _linear_fused(settings: Settings) -> Predictor:
    return FusedLinearPredictor()
