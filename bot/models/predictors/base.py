"""The predictor interface, the training data it sees, and the registry that builds predictors by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import clone

from bot.core.errors import PredictorError
from bot.core.settings import AXES, Settings
from bot.knowledge.taxonomy import Taxonomy
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import NormalisedIssue

Distribution = dict[str, float]
AxisDistributions = dict[str, Distribution]
Arrays = dict[str, np.ndarray]
Meta = dict[str, Any]
State = tuple[Arrays, Meta]  # a fitted predictor as plain arrays plus JSON: what packs and the cache store


@dataclass
class Query:
    """One issue as the predictors see it: normalised text, embedding and nearest cases."""

    issue: NormalisedIssue
    vector: np.ndarray
    hits: list[tuple[int, float]]


@dataclass
class TrainingSet:
    """The case base with its normalised texts and, per axis, the label each case teaches (or None)."""

    index: CaseIndex
    texts: list[str]
    taxonomy: Taxonomy
    targets: dict[str, list[str | None]] = field(default_factory=dict)

    @classmethod
    def build(cls, index: CaseIndex, texts: list[str], taxonomy: Taxonomy, use_silver: bool) -> TrainingSet:
        targets: dict[str, list[str | None]] = {}
        for axis in AXES:
            targets[axis] = [training_label(c.labels, c.silver, taxonomy, axis, use_silver) for c in index.cases]
        return cls(index=index, texts=texts, taxonomy=taxonomy, targets=targets)

    def subset(self, indices: list[int] | np.ndarray) -> TrainingSet:
        """The training set restricted to some cases (a fold)."""
        picked = [int(i) for i in indices]
        index = CaseIndex([self.index.cases[i] for i in picked], self.index.vectors[picked])
        return TrainingSet(index=index, texts=[self.texts[i] for i in picked], taxonomy=self.taxonomy,
                           targets={axis: [labels[i] for i in picked] for axis, labels in self.targets.items()})

    def rows(self, axis: str) -> tuple[np.ndarray, list[str]]:
        """Indices of the cases that teach `axis`, and their labels."""
        pairs = [(i, y) for i, y in enumerate(self.targets[axis]) if y is not None]
        return np.array([i for i, _ in pairs], dtype=int), [y for _, y in pairs]


def fit_vectorizer(vectorizer: Any, texts: list[str]) -> Any:
    """Fit a TF-IDF vectorizer; on a training set too small for its document-frequency bounds (fewer than four
    texts under `max_df=0.5, min_df=2`) the bounds are dropped rather than the fit failing."""
    if isinstance(vectorizer.max_df, float) and len(texts) * vectorizer.max_df < max(vectorizer.min_df, 1) + 1:
        vectorizer.set_params(max_df=1.0, min_df=1)
    return vectorizer.fit(texts)


def training_label(labels: dict[str, str | None], silver: dict[str, str | None], taxonomy: Taxonomy,
                   axis: str, use_silver: bool) -> str | None:
    """The gold label when established; else, if allowed, the annotator's silver guess; else None."""
    gold = labels.get(axis)
    if taxonomy.is_established(axis, gold):
        return gold
    guess = silver.get(axis) if use_silver else None
    return guess if taxonomy.is_established(axis, guess) else None


def normalise_distribution(scores: dict[str, float], labels: tuple[str, ...]) -> Distribution:
    """A probability over every predictable label (missing ones get 0), summing to 1."""
    full = {label: max(0.0, float(scores.get(label, 0.0))) for label in labels}
    total = sum(full.values())
    if total <= 0:
        return {label: 1.0 / len(labels) for label in labels}
    return {label: p / total for label, p in full.items()}


def label_priors(data: TrainingSet) -> dict[str, Distribution]:
    """Per axis, the share of each label among the cases that teach it."""
    out: dict[str, Distribution] = {}
    for axis in AXES:
        _, labels = data.rows(axis)
        out[axis] = normalise_distribution(dict(Counter(labels)), data.taxonomy.predictable(axis))
    return out


class PerAxisModels:
    """One scikit-learn classifier per axis on a shared feature matrix; an axis with one label is constant."""

    def __init__(self, prototype: Any) -> None:
        self._prototype = prototype  # an unfitted estimator, cloned per axis
        self._models: dict[str, Any] = {}
        self._labels: dict[str, tuple[str, ...]] = {}

    def fit(self, data: TrainingSet, matrix: Any) -> None:
        for axis in AXES:
            self._labels[axis] = data.taxonomy.predictable(axis)
            rows, labels = data.rows(axis)
            if len(set(labels)) < 2:
                self._models[axis] = labels[0] if labels else self._labels[axis][0]
            else:
                self._models[axis] = clone(self._prototype).fit(matrix[rows], labels)

    def predict(self, matrix: Any, count: int) -> list[AxisDistributions]:
        out: list[AxisDistributions] = [{} for _ in range(count)]
        for axis, model in self._models.items():
            if isinstance(model, str):
                rows = [{model: 1.0}] * count
            else:
                rows = [dict(zip(model.classes_, row, strict=True)) for row in model.predict_proba(matrix)]
            for dist, scores in zip(out, rows, strict=True):
                dist[axis] = normalise_distribution(scores, self._labels[axis])
        return out

    def state(self, prefix: str = "") -> State:
        """Linear classifiers as arrays (coef, intercept) plus their classes; constant axes as their label."""
        arrays: Arrays = {}
        meta: Meta = {"labels": {a: list(v) for a, v in self._labels.items()}, "constant": {}, "classes": {}}
        for axis, model in self._models.items():
            if isinstance(model, str):
                meta["constant"][axis] = model
                continue
            if not hasattr(model, "coef_"):
                raise PredictorError(f"{type(model).__name__} has no linear coefficients; it cannot be stored")
            meta["classes"][axis] = [str(c) for c in model.classes_]
            arrays[f"{prefix}{axis}.coef"] = np.asarray(model.coef_, dtype=np.float32)
            arrays[f"{prefix}{axis}.intercept"] = np.asarray(model.intercept_, dtype=np.float32)
        return arrays, meta

    def restore(self, arrays: Arrays, meta: Meta, prefix: str = "") -> None:
        """The inverse of `state`: fitted estimators rebuilt from their coefficients, no pickle involved."""
        self._labels = {a: tuple(v) for a, v in meta["labels"].items()}
        self._models = {}
        for axis, label in meta["constant"].items():
            self._models[axis] = label
        for axis, classes in meta["classes"].items():
            model = clone(self._prototype)
            model.classes_ = np.array(classes, dtype=object)
            model.coef_ = arrays[f"{prefix}{axis}.coef"].astype(np.float64)
            model.intercept_ = arrays[f"{prefix}{axis}.intercept"].astype(np.float64)
            model.n_features_in_ = model.coef_.shape[1]
            model.n_iter_ = np.zeros(1, dtype=np.int32)
            self._models[axis] = model

    def round_trip(self, prefix: str = "") -> None:
        """Keep exactly what a stored copy would hold, so a fresh fit and a loaded one predict the same."""
        self.restore(*self.state(prefix), prefix=prefix)


@dataclass
class PredictionRecord:
    """One query's answer: the distribution per axis, why a fallback answered instead (None when none did),
    and per axis the score the engine's calibrator maps to a confidence."""

    distributions: AxisDistributions
    fallback: str | None
    scores: dict[str, float]

    @classmethod
    def plain(cls, distributions: AxisDistributions) -> PredictionRecord:
        """A predictor's own answer: calibrated, as it was fitted, on each axis's top probability."""
        return cls(distributions, None, {axis: max(d.values(), default=0.0) for axis, d in distributions.items()})


class Predictor(ABC):
    """Learns from a training set, then gives a probability per label on each axis for each query."""

    name: str = "predictor"
    cacheable: bool = True  # a fitted copy may be stored (state()/restore()) and reused

    @abstractmethod
    def fit(self, data: TrainingSet) -> None: ...

    @abstractmethod
    def predict_proba(self, queries: list[Query]) -> list[AxisDistributions]: ...

    def describe(self) -> dict[str, object]:
        """What identifies this predictor's configuration in results files."""
        return {"name": self.name}

    def predict_records(self, queries: list[Query]) -> list[PredictionRecord]:
        """Per query: the distributions, whether a fallback answered, and the score to calibrate."""
        return [PredictionRecord.plain(d) for d in self.predict_proba(queries)]

    def state(self) -> State:
        """The fitted predictor as arrays plus JSON-able metadata (no pickle), for packs and the fit cache."""
        raise PredictorError(f"the {self.name} predictor cannot be stored; use one that implements state()")

    def restore(self, arrays: Arrays, meta: Meta, data: TrainingSet) -> None:
        """Become the fitted predictor that `state()` described, over the case base `data`."""
        raise PredictorError(f"the {self.name} predictor cannot be restored from a stored state")

    def packed_part(self) -> Predictor | None:
        """The part of this predictor a pack can hold fitted (itself when it can be stored; None if none)."""
        return self if self.cacheable else None

    def bind(self, data: TrainingSet) -> None:  # noqa: B027  (most predictors keep no case base)
        """Share the engine's live case base (predictors that keep it)."""

    def calibration_proxy(self) -> Predictor:
        """The predictor whose cross-validated scores calibrate this one (itself, unless too costly)."""
        return self


PredictorFactory = Callable[[Settings], Predictor]
_REGISTRY: dict[str, PredictorFactory] = {}
_PLUGIN_PROBLEMS: dict[str, str] = {}


def register(name: str) -> Callable[[PredictorFactory], PredictorFactory]:
    def decorate(factory: PredictorFactory) -> PredictorFactory:
        _REGISTRY[name] = factory
        return factory
    return decorate


def predictor_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def make_predictor(name: str, settings: Settings) -> Predictor:
    """Build a registered predictor; an unknown name says which exist."""
    _load_builtin()
    if name in _PLUGIN_PROBLEMS:
        raise PredictorError(f"predictor plugin {name!r} cannot be used: {_PLUGIN_PROBLEMS[name]}")
    if name not in _REGISTRY:
        raise PredictorError(f"unknown predictor {name!r}; choose one of {sorted(_REGISTRY)} "
                             "(--predictor or DDL_TRIAGE_PREDICTOR; other packages add predictors through the "
                             "`ddl_triage.predictors` entry-point group)")
    return _REGISTRY[name](settings)


def _load_builtin() -> None:
    # Importing the modules registers their predictors; installed plugins come after, never replacing one.
    from bot.models.predictors import baselines, fused, knn, linear, llm, structured, titled  # noqa: F401
    from bot.models.predictors.plugins import load_plugins

    _PLUGIN_PROBLEMS.update(load_plugins(_REGISTRY, register))
