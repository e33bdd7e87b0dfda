"""Is a confidence of 0.8 right 80% of the time? Expected calibration error, Brier score, reliability bins.

All three judge the calibrated confidence of the top-ranked label against whether that label is right.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BINS = 10  # equal-width confidence bins, the usual choice (Guo et al., 2017)


def _bin_of(confidence: np.ndarray, bins: int) -> np.ndarray:
    return np.minimum((confidence * bins).astype(int), bins - 1)


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> float:
    """Sum over bins of (share of records) x |accuracy - mean confidence|; 0 for a perfectly calibrated model."""
    if not len(confidence):
        return 0.0
    conf, hit = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    which = _bin_of(conf, bins)
    total = 0.0
    for b in range(bins):
        mask = which == b
        if mask.any():
            total += mask.mean() * abs(hit[mask].mean() - conf[mask].mean())
    return float(total)


def brier_score(confidence: Sequence[float], correct: Sequence[bool]) -> float:
    """Mean squared gap between the confidence and the 0/1 correctness of the top label."""
    if not len(confidence):
        return 0.0
    conf, hit = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    return float(np.mean((conf - hit) ** 2))


def reliability_bins(confidence: Sequence[float], correct: Sequence[bool], bins: int = BINS
                     ) -> list[dict[str, float]]:
    """Per non-empty bin: its range, record count, mean confidence and accuracy (the reliability diagram)."""
    conf, hit = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    which = _bin_of(conf, bins)
    out = []
    for b in range(bins):
        mask = which == b
        if mask.any():
            out.append({"low": b / bins, "high": (b + 1) / bins, "n": int(mask.sum()),
                        "confidence": round(float(conf[mask].mean()), 4),
                        "accuracy": round(float(hit[mask].mean()), 4)})
    return out
