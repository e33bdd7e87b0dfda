"""A per-repository label model over the repository's own labels: a similarity-weighted vote of the nearest
issues of its history, per label a threshold chosen by leave-one-out over that history for a target
precision; labels with too few examples, or no threshold that reaches the target, are never suggested."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from bot.memory.store import MemoryIssue

K = 10
MIN_EXAMPLES = 5
TARGET_PRECISION = 0.8
MIN_SUPPORT = 3  # suggestions on the history at or above the threshold that the precision is judged on


@dataclass
class LabelModel:
    """Fitted on (issues, vectors) of one repository; `suggest` abstains by returning nothing."""

    issues: list[MemoryIssue]
    vectors: np.ndarray
    thresholds: dict[str, float] = field(default_factory=dict)
    precision: dict[str, float] = field(default_factory=dict)

    @classmethod
    def fit(cls, issues: list[MemoryIssue], vectors: np.ndarray, min_examples: int = MIN_EXAMPLES,
            target: float = TARGET_PRECISION) -> LabelModel:
        model = cls(issues, vectors)
        counts = Counter(name for issue in issues for name in issue.labels)
        labels = sorted(name for name, n in counts.items() if n >= min_examples)
        if not labels or len(issues) < 2:
            return model
        scores = model._scores(vectors, exclude_self=True)
        for name in labels:
            truth = np.array([name in issue.labels for issue in issues])
            threshold, precision = _threshold_for(scores[name], truth, target)
            if threshold is not None:
                model.thresholds[name], model.precision[name] = threshold, precision
        return model

    def suggest(self, vector: np.ndarray) -> list[tuple[str, float]]:
        """Labels whose vote reaches their threshold, best first (empty: the model abstains)."""
        if not self.thresholds:
            return []
        scores = self._scores(vector[None, :], exclude_self=False)
        found = [(name, float(scores[name][0])) for name, t in self.thresholds.items() if scores[name][0] >= t]
        return sorted(found, key=lambda item: -item[1])

    def _scores(self, queries: np.ndarray, exclude_self: bool, chunk: int = 1024) -> dict[str, np.ndarray]:
        """Per label, the similarity-weighted share of the k nearest issues that carry it (in row chunks, so a
        leave-one-out over 10^5 issues never holds an n x n matrix)."""
        k = min(K, self.vectors.shape[0] - (1 if exclude_self else 0))
        names = self._labels()
        has = np.array([[name in issue.labels for name in names] for issue in self.issues], dtype=np.float32)
        out = np.zeros((len(queries), len(names)), dtype=np.float32)
        for start in range(0, len(queries), chunk):
            sims = queries[start:start + chunk] @ self.vectors.T
            if exclude_self:
                rows = np.arange(len(sims))
                sims[rows, rows + start] = -np.inf
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            weights = np.clip(np.take_along_axis(sims, top, axis=1), 0.0, None)
            out[start:start + chunk] = np.einsum("qk,qkl->ql", weights, has[top]) / (
                weights.sum(axis=1, keepdims=True) + 1e-9)
        return {name: out[:, j] for j, name in enumerate(names)}

    def _labels(self) -> list[str]:
        return sorted(self.thresholds) if self.thresholds else sorted({n for i in self.issues for n in i.labels})


def _threshold_for(scores: np.ndarray, truth: np.ndarray, target: float) -> tuple[float | None, float]:
    """The lowest vote threshold whose precision on the history reaches `target` with enough support."""
    for t in np.unique(np.round(scores, 3)):
        picked = scores >= t
        if t <= 0 or picked.sum() < MIN_SUPPORT:
            continue
        precision = float(truth[picked].mean())
        if precision >= target:
            return float(t), precision
    return None, 0.0
