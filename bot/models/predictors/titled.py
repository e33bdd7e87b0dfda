"""`linear` plus character n-grams of the title: the title names the failure in few words, often in a form
word tokens miss (`ZeRO-3`, `bf16`, `OOM`, `NCCL_TIMEOUT`, `Megatron-LM`).

Measured on repeated, grouped cross-validation of both ddl files against `linear` (README, "Accuracy").
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer

from bot.core.settings import Settings
from bot.models.predictors.base import (
    Arrays,
    AxisDistributions,
    Meta,
    Predictor,
    Query,
    State,
    TrainingSet,
    fit_vectorizer,
    register,
)
from bot.models.predictors.linear import LinearPredictor

TITLE_NGRAMS = (3, 5)


def title_vectorizer() -> TfidfVectorizer:
    return TfidfVectorizer(analyzer="char_wb", ngram_range=TITLE_NGRAMS, min_df=2, sublinear_tf=True,
                           max_features=20000)


class TitledLinearPredictor(LinearPredictor):
    """Logistic regression per axis on `linear`'s features and a TF-IDF of the title's character n-grams."""

    name = "linear-title"

    def __init__(self, c: float = 2.0, tfidf_weight: float = 1.0, flag_weight: float = 0.5,
                 title_weight: float = 1.0) -> None:
        super().__init__(c, tfidf_weight, flag_weight)
        self.title_weight = title_weight

    def _all_features(self, vectors: np.ndarray, texts: list[str], titles: list[str]) -> sparse.csr_matrix:
        parts = [self.feature_matrix(vectors, texts), self._titles.transform(titles) * self.title_weight]
        return sparse.hstack(parts, format="csr")

    def fit(self, data: TrainingSet) -> None:
        titles = [case.title or "" for case in data.index.cases]
        self._tfidf = self._text_vectorizer()
        fit_vectorizer(self._tfidf, data.texts)
        self._titles = title_vectorizer()
        self._titles.fit(titles)
        self._models = self.unfitted_models()
        self._models.fit(data, self._all_features(data.index.vectors, data.texts, titles))
        self._models.round_trip()  # predict exactly as a stored copy would
        self._tfidf.idf_ = self._tfidf.idf_.astype(np.float32).astype(np.float64)
        self._titles.idf_ = self._titles.idf_.astype(np.float32).astype(np.float64)

    def _text_vectorizer(self) -> TfidfVectorizer:
        return TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_df=0.5, sublinear_tf=True, max_features=20000)

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        if not queries:
            return []
        matrix = self._all_features(np.vstack([q.vector for q in queries]), [q.issue.text for q in queries],
                                    [q.issue.title for q in queries])
        return self._models.predict(matrix, len(queries))

    def state(self) -> State:
        arrays, meta = super().state()
        terms = sorted(self._titles.vocabulary_.items(), key=lambda item: item[1])
        arrays["title.idf"] = self._titles.idf_.astype(np.float32)
        return arrays, {**meta, "title_terms": [term for term, _ in terms]}

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        super().restore(arrays, meta, data)
        self._titles = title_vectorizer()
        self._titles.vocabulary_ = {term: i for i, term in enumerate(meta["title_terms"])}
        self._titles.idf_ = arrays["title.idf"].astype(np.float64)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "name": self.name, "title_char_ngrams": list(TITLE_NGRAMS),
                "title_weight": self.title_weight}


@register("linear-title")
def _linear_title(settings: Settings) -> Predictor:
    return TitledLinearPredictor()
