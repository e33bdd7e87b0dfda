"""Per-axis logistic regression on the embedding, TF-IDF and error-signature flags; and its blend with knn."""

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
    register,
)
from bot.models.predictors.knn import KnnPredictor


class LinearPredictor(Predictor):
    """Logistic regression per axis with balanced class weights (macro-F1 rewards the rare classes)."""

    name = "linear"

    def __init__(self, c: float = 2.0, tfidf_weight: float = 1.0, flag_weight: float = 0.5) -> None:
        self.c, self.tfidf_weight, self.flag_weight = c, tfidf_weight, flag_weight

    def feature_matrix(self, vectors: np.ndarray, texts: list[str]) -> sparse.csr_matrix:
        parts = [sparse.csr_matrix(vectors), self._tfidf.transform(texts) * self.tfidf_weight,
                 signature_flags(texts) * self.flag_weight]
        return sparse.hstack(parts, format="csr")

    def fit(self, data: TrainingSet) -> None:
        self._tfidf = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_df=0.5, sublinear_tf=True,
                                      max_features=20000)
        fit_vectorizer(self._tfidf, data.texts)
        self._models = self.unfitted_models()
        self._models.fit(data, self.feature_matrix(data.index.vectors, data.texts))
        self._models.round_trip()
        self._tfidf.idf_ = self._tfidf.idf_.astype(np.float32).astype(np.float64)

    def unfitted_models(self) -> PerAxisModels:
        return PerAxisModels(LogisticRegression(C=self.c, max_iter=3000, class_weight="balanced"))

    def state(self) -> State:
        arrays, meta = self._models.state()
        vocabulary = sorted(self._tfidf.vocabulary_.items(), key=lambda item: item[1])
        arrays["tfidf.idf"] = self._tfidf.idf_.astype(np.float32)
        meta = {"config": self.describe(), "models": meta, "tfidf_terms": [term for term, _ in vocabulary],
                "tfidf_params": {"ngram_range": list(self._tfidf.ngram_range), "sublinear_tf": True}}
        return arrays, meta

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        self._tfidf = TfidfVectorizer(ngram_range=tuple(meta["tfidf_params"]["ngram_range"]), sublinear_tf=True)
        self._tfidf.vocabulary_ = {term: i for i, term in enumerate(meta["tfidf_terms"])}
        self._tfidf.idf_ = arrays["tfidf.idf"].astype(np.float64)
        self._models = self.unfitted_models()
        self._models.restore(arrays, meta["models"])

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        if not queries:
            return []
        matrix = self.feature_matrix(np.vstack([q.vector for q in queries]), [q.issue.text for q in queries])
        return self._models.predict(matrix, len(queries))

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "C": self.c, "tfidf_weight": self.tfidf_weight, "flag_weight": self.flag_weight}


class EnsemblePredictor(Predictor):
    """Weighted mean of the linear model and the neighbour vote."""

    name = "ensemble"

    def __init__(self, members: list[tuple[Predictor, float]]) -> None:
        self.members = members

    def fit(self, data: TrainingSet) -> None:
        for member, _ in self.members:
            member.fit(data)

    def bind(self, data: TrainingSet) -> None:
        for member, _ in self.members:
            member.bind(data)

    def state(self) -> State:
        arrays: Arrays = {}
        metas = []
        for i, (member, _) in enumerate(self.members):
            member_arrays, member_meta = member.state()
            arrays.update({f"m{i}.{k}": v for k, v in member_arrays.items()})
            metas.append(member_meta)
        return arrays, {"members": metas}

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        for i, ((member, _), member_meta) in enumerate(zip(self.members, meta["members"], strict=True)):
            prefix = f"m{i}."
            member.restore({k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}, member_meta, data)

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        outputs = [(member.predict_proba(queries), weight) for member, weight in self.members]
        total = sum(weight for _, weight in self.members)
        blended: list[AxisDistributions] = []
        for i in range(len(queries)):
            dist: AxisDistributions = {}
            for axis in AXES:
                labels = outputs[0][0][i][axis].keys()
                dist[axis] = {label: sum(out[i][axis][label] * w for out, w in outputs) / total for label in labels}
            blended.append(dist)
        return blended

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "members": [(m.describe(), w) for m, w in self.members]}


@register("linear")
def _linear(settings: Settings) -> Predictor:
    return LinearPredictor()


@register("ensemble")
def _ensemble(settings: Settings) -> Predictor:
    return EnsemblePredictor([(LinearPredictor(), 0.6), (KnnPredictor(k=settings.neighbours), 0.4)])


@register("default")
def _default(settings: Settings) -> Predictor:
    """Chosen by the paired table of repeated, grouped cross-validation on both ddl files (README, "Accuracy"):
    `linear-structured`, `linear-fused` with the title's cues and the failure's structure as views of their own."""
    from bot.models.predictors.structured import StructuredPredictor

    return StructuredPredictor()
