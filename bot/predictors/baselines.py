"""Reference points for the benchmarks: the majority class and plain TF-IDF + logistic regression."""

from __future__ import annotations

from collections import Counter

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from bot.predictors.base import (
    AxisDistributions,
    Distribution,
    Predictor,
    Query,
    TrainingSet,
    normalise_distribution,
    register,
)
from bot.settings import AXES, Settings


class MajorityPredictor(Predictor):
    """Always the training prior: the most frequent label ranks first."""

    name = "majority"

    def fit(self, data: TrainingSet) -> None:
        self._priors: dict[str, Distribution] = {}
        for axis in AXES:
            _, labels = data.rows(axis)
            self._priors[axis] = normalise_distribution(dict(Counter(labels)), data.taxonomy.predictable(axis))

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        return [dict(self._priors) for _ in queries]


class TfidfPredictor(Predictor):
    """Word and bigram TF-IDF of the raw title and body, one logistic regression per axis."""

    name = "tfidf"

    def fit(self, data: TrainingSet) -> None:
        self._vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=30000)
        matrix = self._vectorizer.fit_transform(data.texts)
        self._labels = {axis: data.taxonomy.predictable(axis) for axis in AXES}
        self._models: dict[str, LogisticRegression | str] = {}
        for axis in AXES:
            rows, labels = data.rows(axis)
            if len(set(labels)) < 2:
                self._models[axis] = labels[0] if labels else self._labels[axis][0]
                continue
            self._models[axis] = LogisticRegression(max_iter=2000, C=10.0).fit(matrix[rows], labels)

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        matrix = self._vectorizer.transform([q.issue.text for q in queries])
        out: list[AxisDistributions] = [{} for _ in queries]
        for axis, model in self._models.items():
            if isinstance(model, str):
                for dist in out:
                    dist[axis] = normalise_distribution({model: 1.0}, self._labels[axis])
                continue
            probs = model.predict_proba(matrix)
            for dist, row in zip(out, probs, strict=True):
                dist[axis] = normalise_distribution(dict(zip(model.classes_, row, strict=True)), self._labels[axis])
        return out


@register("majority")
def _majority(settings: Settings) -> Predictor:
    return MajorityPredictor()


@register("tfidf")
def _tfidf(settings: Settings) -> Predictor:
    return TfidfPredictor()
