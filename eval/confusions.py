"""The most frequent errors per axis, side by side for every predictor: where a new predictor gained or lost.

Counts are summed over all repetitions of the folds (each record is tested once per repetition), so a row
reads "gold -> predicted: how many times, over R repetitions".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.tables import Table, scored_axes

TOP_ERRORS = 8  # rows per axis: the most frequent errors of the baseline, then any other predictor's


def error_tables(evaluation: Mapping[str, Any], axes: tuple[str, ...] = ("kind", "stage", "symptom")) -> list[Table]:
    predictors = evaluation["predictors"]
    reference = str((evaluation.get("paired") or {}).get("reference"))
    ordered = ([reference] if reference in predictors else []) + [str(n) for n in predictors if n != reference]
    tables = []
    for axis in [a for a in axes if a in scored_axes(evaluation)]:
        counts = {name: {(g, p): n for g, p, n in predictors[name]["axes"][axis].get("errors", [])}
                  for name in ordered}
        pairs: list[tuple[str, str]] = []
        for name in ordered:
            top = sorted(counts[name].items(), key=lambda item: (-item[1], item[0]))[:TOP_ERRORS]
            pairs += [pair for pair, _ in top if pair not in pairs]
        if not pairs:
            continue
        rows = [[f"{gold} -> {predicted}", *(str(counts[name].get((gold, predicted), 0)) for name in ordered)]
                for gold, predicted in pairs]
        rows.append(["all errors", *(str(sum(counts[name].values())) for name in ordered)])
        repeats = evaluation.get("repeats", 1)
        tables.append(Table(f"errors-{axis}", f"Most frequent {axis} errors (gold -> predicted)",
                            ["error", *ordered], rows,
                            f"Counts summed over {repeats} repetition(s) of the folds; the first column's predictor "
                            "is the paired table's baseline."))
    return tables
