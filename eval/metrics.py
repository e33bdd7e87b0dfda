"""Scoring one axis: accuracy, macro-F1 with bootstrap intervals, top-k, abstention, curve, per class.

Convention: macro-F1 averages F1 over the classes present in the gold labels or the predictions of the
axis (a class that is neither in gold nor predicted does not count); F1 of a class that is predicted but
never gold is 0. This equals scikit-learn's `f1_score(average="macro", labels=<that union>)`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE_LEVEL = 0.95
TOP_K = 3
MISSING = "missing"  # the skip reason of a record whose gold value is null

Interval = tuple[float, float]


def class_labels(gold: Sequence[str], predicted: Sequence[str]) -> list[str]:
    """The classes that count on an axis: present in gold or predictions, sorted."""
    return sorted(set(gold) | set(predicted))


def confusion_matrix(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Counts with gold classes as rows and predicted classes as columns, in the order of `labels`."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for g, p in zip(gold, predicted, strict=True):
        matrix[index[g], index[p]] += 1
    return matrix


def f1_per_class(matrix: np.ndarray) -> np.ndarray:
    """F1 of each class of a confusion matrix (0 where a class has no true positive)."""
    tp = np.diagonal(matrix, axis1=-2, axis2=-1).astype(float)
    denominator = matrix.sum(axis=-1) + matrix.sum(axis=-2)  # 2tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)


def macro_f1_from_confusion(matrix: np.ndarray) -> np.ndarray | float:
    """Mean F1 over the classes present (in gold or predictions); works on a stack of matrices too."""
    present = (matrix.sum(axis=-1) + matrix.sum(axis=-2)) > 0
    f1 = f1_per_class(matrix)
    count = present.sum(axis=-1)
    means = np.divide((f1 * present).sum(axis=-1), count, out=np.zeros(np.shape(count)), where=count > 0)
    return float(means) if np.ndim(means) == 0 else means


def macro_f1(gold: Sequence[str], predicted: Sequence[str]) -> float:
    labels = class_labels(gold, predicted)
    return float(macro_f1_from_confusion(confusion_matrix(gold, predicted, labels)))


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> float:
    if not gold:
        return 0.0
    return sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)


def top_k_accuracy(gold: Sequence[str], ranked: Sequence[Sequence[str]], k: int = TOP_K) -> float:
    """Share of records whose gold label is among the first k ranked labels."""
    if not gold:
        return 0.0
    return sum(g in list(r)[:k] for g, r in zip(gold, ranked, strict=True)) / len(gold)


def bootstrap_confusions(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str], *,
                         seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """Confusion matrices of `resamples` resamples (with replacement) of the records, seeded."""
    index = {label: i for i, label in enumerate(labels)}
    k = len(labels)
    codes = np.array([index[g] * k + index[p] for g, p in zip(gold, predicted, strict=True)], dtype=np.int64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(codes), size=(resamples, len(codes)))
    offsets = (np.arange(resamples, dtype=np.int64) * k * k)[:, None]
    counts = np.bincount((codes[picks] + offsets).ravel(), minlength=resamples * k * k)
    return counts.reshape(resamples, k, k)


def percentile_interval(values: np.ndarray, level: float = CONFIDENCE_LEVEL) -> Interval:
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_intervals(gold: Sequence[str], predicted: Sequence[str], *, seed: int,
                        resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Interval]:
    """95% percentile intervals of accuracy and macro-F1 over the same seeded resamples."""
    labels = class_labels(gold, predicted)
    stack = bootstrap_confusions(gold, predicted, labels, seed=seed, resamples=resamples)
    acc = np.trace(stack, axis1=1, axis2=2) / len(gold)
    return {"accuracy": percentile_interval(acc),
            "macro_f1": percentile_interval(np.asarray(macro_f1_from_confusion(stack)))}


def coverage_precision(gold: Sequence[str], shown: Sequence[str | None]) -> tuple[float, float | None]:
    """Share of records given a label (not abstained), and the accuracy of those labels (None if none)."""
    if not gold:
        return 0.0, None
    answered = [(g, s) for g, s in zip(gold, shown, strict=True) if s is not None]
    coverage = len(answered) / len(gold)
    precision = sum(g == s for g, s in answered) / len(answered) if answered else None
    return coverage, precision


def accuracy_coverage_curve(gold: Sequence[str], predicted: Sequence[str],
                            confidence: Sequence[float]) -> list[dict[str, float]]:
    """Answering only at confidence >= t, for every distinct t (descending): coverage and accuracy.

    Records with equal confidence enter together, so the curve does not depend on the input order.
    """
    if not gold:
        return []
    conf = np.asarray(confidence, dtype=float)
    correct = np.array([g == p for g, p in zip(gold, predicted, strict=True)], dtype=float)
    order = np.argsort(-conf, kind="stable")
    conf, correct = conf[order], correct[order]
    answered = np.arange(1, len(conf) + 1)
    hits = np.cumsum(correct)
    last_of_tie = np.append(conf[1:] != conf[:-1], True)
    return [{"threshold": round(float(conf[i]), 4), "coverage": round(float(answered[i] / len(conf)), 4),
             "accuracy": round(float(hits[i] / answered[i]), 4)} for i in np.flatnonzero(last_of_tie)]


def area_under_curve(curve: Sequence[dict[str, float]]) -> float:
    """Accuracy integrated over coverage (step-wise): 1.0 when every answer is right at every coverage."""
    area, previous = 0.0, 0.0
    for point in curve:
        area += point["accuracy"] * (point["coverage"] - previous)
        previous = point["coverage"]
    return area


def per_class(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, dict[str, float]]:
    """Precision, recall, F1 and support of every class present in gold or predictions."""
    labels = class_labels(gold, predicted)
    matrix = confusion_matrix(gold, predicted, labels)
    tp = np.diagonal(matrix).astype(float)
    predicted_n, support = matrix.sum(axis=0), matrix.sum(axis=1)
    precision = np.divide(tp, predicted_n, out=np.zeros_like(tp), where=predicted_n > 0)
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    f1 = f1_per_class(matrix)
    return {label: {"precision": _r(precision[i]), "recall": _r(recall[i]), "f1": _r(f1[i]),
                    "support": int(support[i])} for i, label in enumerate(labels)}


def split_established(gold: Sequence[str | None], established: Callable[[str | None], bool]
                      ) -> tuple[list[int], dict[str, int]]:
    """Rows whose gold value is scored, and the skipped ones counted by reason (`missing` or the marker)."""
    rows: list[int] = []
    skipped: Counter[str] = Counter()
    for i, value in enumerate(gold):
        if established(value):
            rows.append(i)
        else:
            skipped[MISSING if value is None else value] += 1
    return rows, dict(sorted(skipped.items()))


def score_axis(gold: Sequence[str], ranked: Sequence[Sequence[str]], confidence: Sequence[float],
               shown: Sequence[str | None], *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
               ) -> dict[str, object]:
    """Every metric of one axis over scored records; `ranked[i][0]` is the record's top-1 prediction."""
    predicted = [r[0] for r in ranked]
    if not gold:
        return {"n": 0}
    labels = class_labels(gold, predicted)
    intervals = bootstrap_intervals(gold, predicted, seed=seed, resamples=resamples)
    coverage, precision = coverage_precision(gold, shown)
    curve = accuracy_coverage_curve(gold, predicted, confidence)
    return {
        "n": len(gold),
        "accuracy": _r(accuracy(gold, predicted)), "accuracy_ci": _ri(intervals["accuracy"]),
        "macro_f1": _r(macro_f1(gold, predicted)), "macro_f1_ci": _ri(intervals["macro_f1"]),
        f"top{TOP_K}_accuracy": _r(top_k_accuracy(gold, ranked)),
        "coverage_at_threshold": _r(coverage),
        "precision_at_threshold": None if precision is None else _r(precision),
        "curve_area": _r(area_under_curve(curve)),
        "curve": curve,
        "per_class": per_class(gold, predicted),
        "confusion": {"labels": labels, "matrix": confusion_matrix(gold, predicted, labels).tolist()},
    }


def _r(value: float) -> float:
    return round(float(value), 4)


def _ri(interval: Interval) -> list[float]:
    return [_r(interval[0]), _r(interval[1])]


def precision_at_coverage(gold: Sequence[str], predicted: Sequence[str], confidence: Sequence[float],
                          coverage: float) -> float | None:
    """Accuracy of the most confident answers covering at least `coverage` of the records (ties enter together)."""
    for point in accuracy_coverage_curve(gold, predicted, confidence):
        if point["coverage"] >= coverage - 1e-9:
            return point["accuracy"]
    return None
