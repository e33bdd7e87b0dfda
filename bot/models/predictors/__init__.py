"""Predictors behind one interface, built by name: majority, tfidf, knn, linear, ensemble, default, llm."""

from bot.models.predictors.base import Predictor, Query, TrainingSet, make_predictor, predictor_names

__all__ = ["Predictor", "Query", "TrainingSet", "make_predictor", "predictor_names"]
