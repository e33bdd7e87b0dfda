"""Paired comparisons of two predictors on the same records: is the difference more than resampling noise?

Both predictors answered the same records in the same repetitions of the same folds, so their difference is
measured record by record: a bootstrap that resamples records (the same resample for both predictors and
every repetition) gives the interval of the difference in accuracy and in macro-F1 averaged over
repetitions, and McNemar's exact test asks whether the records only one of them gets right lean one way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest

from bot.core.settings import AXES
from bot.knowledge.taxonomy import Taxonomy
from eval.metrics import bootstrap_confusions, macro_f1, macro_f1_from_confusion, percentile_interval
from eval.scoring import AxisView, Sample, axis_view, by_repeat


def mcnemar_p(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> float:
    """Exact two-sided McNemar test on the records exactly one of the two predictors gets right."""
    only_a = sum(1 for a, b in zip(correct_a, correct_b, strict=True) if a and not b)
    only_b = sum(1 for a, b in zip(correct_a, correct_b, strict=True) if b and not a)
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def _views(samples: Sequence[Sample], axis: str, taxonomy: Taxonomy) -> list[AxisView]:
    return [axis_view(sorted(r, key=lambda s: s["id"]), axis, taxonomy) for r in by_repeat(samples).values()]


def compare_axis(a: Sequence[Sample], b: Sequence[Sample], axis: str, taxonomy: Taxonomy, *, seed: int,
                 resamples: int) -> dict[str, object] | None:
    """Difference a - b in accuracy and macro-F1 (mean over repetitions), its paired interval, McNemar's p."""
    views_a, views_b = _views(a, axis, taxonomy), _views(b, axis, taxonomy)
    if not views_a or not views_a[0].gold or len(views_a) != len(views_b):
        return None
    labels = sorted({x for v in views_a + views_b for x in (*v.gold, *v.predicted)})
    acc_diff = np.zeros(resamples)
    f1_diff = np.zeros(resamples)
    point_acc, point_f1, p_values = 0.0, 0.0, []
    for va, vb in zip(views_a, views_b, strict=True):
        if va.gold != vb.gold:
            raise ValueError(f"{axis}: the two predictors were scored on different records")
        stack_a = bootstrap_confusions(va.gold, va.predicted, labels, seed=seed, resamples=resamples)
        stack_b = bootstrap_confusions(vb.gold, vb.predicted, labels, seed=seed, resamples=resamples)
        n = len(va.gold)
        acc_diff += (np.trace(stack_a, axis1=1, axis2=2) - np.trace(stack_b, axis1=1, axis2=2)) / n
        f1_diff += np.asarray(macro_f1_from_confusion(stack_a)) - np.asarray(macro_f1_from_confusion(stack_b))
        correct_a = [g == p for g, p in zip(va.gold, va.predicted, strict=True)]
        correct_b = [g == p for g, p in zip(vb.gold, vb.predicted, strict=True)]
        point_acc += (sum(correct_a) - sum(correct_b)) / n
        point_f1 += _macro_f1(va) - _macro_f1(vb)
        p_values.append(mcnemar_p(correct_a, correct_b))
    r = len(views_a)
    return {"n": len(views_a[0].gold), "repeats": r,
            "accuracy_diff": round(point_acc / r, 4), "accuracy_diff_ci": _round(percentile_interval(acc_diff / r)),
            "macro_f1_diff": round(point_f1 / r, 4), "macro_f1_diff_ci": _round(percentile_interval(f1_diff / r)),
            "mcnemar_p_max": round(max(p_values), 4), "mcnemar_p_median": round(float(np.median(p_values)), 4)}


def compare_all(samples: dict[str, list[Sample]], reference: str, taxonomy: Taxonomy, *, seed: int,
                resamples: int) -> dict[str, dict[str, object]]:
    """Every other predictor against `reference`, per axis (empty when the reference did not run)."""
    if reference not in samples:
        return {}
    out: dict[str, dict[str, object]] = {}
    for name, mine in samples.items():
        if name == reference:
            continue
        out[name] = {axis: compare_axis(mine, samples[reference], axis, taxonomy, seed=seed, resamples=resamples)
                     for axis in AXES}
    return out


def _macro_f1(view: AxisView) -> float:
    return macro_f1(view.gold, view.predicted)


def _round(interval: tuple[float, float]) -> list[float]:
    return [round(interval[0], 4), round(interval[1], 4)]
