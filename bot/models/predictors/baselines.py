"""Reference points for the benchmarks: the majority class and plain TF-IDF + logistic regression."""

from __future__ import annotations

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from bot.core.settings import Settings
from bot.models.predictors.base import (
    AxisDistributions,
    PerAxisModels,
    Predictor,
    Query,
    TrainingSet,
    label_priors,
    register,
)


class MajorityPredictor(Predictor):
    """Always the training prior: the most frequent label ranks first."""

    name = "majority"

    def fit(self, data: TrainingSet) -> None:
        self._priors = label_priors(data)

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        return [dict(self._priors) for _ in queries]


class TfidfPredictor(Predictor):
    """Word and bigram TF-IDF of the normalised title and body, one logistic regression per axis.

    Balanced class weights, as every learned predictor here: comparing against an unweighted baseline would
    credit `linear` with what is only the weighting (macro-F1 rewards the rare classes).
    """

    name = "tfidf"

    def fit(self, data: TrainingSet) -> None:
        self._vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=30000)
        self._models = PerAxisModels(LogisticRegression(max_iter=2000, C=10.0, class_weight="balanced"))
        self._models.fit(data, self._vectorizer.fit_transform(data.texts))

    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]:
        return self._models.predict(self._vectorizer.transform([q.issue.text for q in queries]), len(queries))


@register("majority")
def _majority(settings: Settings) -> Predictor:
    return MajorityPredictor()


@register("tfidf")
def _tfidf(settings: Settings) -> Predictor:
    return TfidfPredictor()
