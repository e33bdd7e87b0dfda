"""The tables of a run as data: rendered into report.md, and exported as CSV and LaTeX for papers.

One table object feeds all three formats, so a figure in a paper is the figure in the report.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.core.settings import AXES


@dataclass
class Table:
    slug: str  # file name stem of the exports
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""

    def markdown(self) -> list[str]:
        lines = [f"### {self.title}", ""] + ([self.note, ""] if self.note else [])
        lines += ["| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return [*lines, ""]

    def csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.header)
        writer.writerows([[_plain(c) for c in row] for row in self.rows])
        return buffer.getvalue()

    def latex(self) -> str:
        spec = "l" * min(len(self.header), 2) + "r" * max(len(self.header) - 2, 0)
        body = [" & ".join(_tex(c) for c in row) + r" \\" for row in self.rows]
        return "\n".join([r"\begin{table}", r"\centering", rf"\caption{{{_tex(self.title)}}}",
                          rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(_tex(h) for h in self.header)
                          + r" \\", r"\midrule", *body, r"\bottomrule", r"\end{tabular}", r"\end{table}", ""])


def scored_axes(evaluation: Mapping[str, Any]) -> list[str]:
    return [a for a in AXES if any(p["axes"][a].get("n") for p in evaluation["predictors"].values())]


def repeated_table(evaluation: Mapping[str, Any]) -> Table:
    axes = scored_axes(evaluation)
    rows = []
    for name, predictor in evaluation["predictors"].items():
        row = [name]
        for axis in axes:
            m = predictor["axes"][axis]
            row += [_mean_sd(m, "accuracy"), _mean_sd(m, "macro_f1")]
        rows.append(row)
    header = ["predictor"] + [f"{a} {what}" for a in axes for what in ("accuracy", "macro-F1")]
    return Table("repeated", f"Accuracy and macro-F1, mean ± sd over {evaluation.get('repeats', 1)} "
                 "repetition(s) of the folds", header, rows)


def calibration_table(evaluation: Mapping[str, Any]) -> Table:
    header, rows = _mean_rows(evaluation, {"ece": "ECE", "brier": "Brier",
                                           "precision_at_60_coverage": "precision@60% coverage"})
    return Table("calibration", "Calibration of the confidence (mean over repetitions)", header, rows,
                 "ECE: expected calibration error over 10 equal-width bins; Brier: mean squared gap between the "
                 "confidence and the top label's 0/1 correctness (lower is better for both); precision@60%: "
                 "accuracy of the 60% most confident answers.")


def paired_table(evaluation: Mapping[str, Any]) -> Table | None:
    paired = evaluation.get("paired") or {}
    comparisons = paired.get("comparisons") or {}
    if not comparisons:
        return None
    axes = scored_axes(evaluation)
    rows = []
    for name, by_axis in comparisons.items():
        row = [name]
        for axis in axes:
            c = by_axis.get(axis)
            row += ["n/a"] * 3 if not c else [_diff(c["accuracy_diff"], c["accuracy_diff_ci"]),
                                              _diff(c["macro_f1_diff"], c["macro_f1_diff_ci"]),
                                              f"{c['mcnemar_p_max']:.3g}"]
        rows.append(row)
    header = ["predictor"] + [f"{a} {w}" for a in axes for w in ("Δ accuracy", "Δ macro-F1", "McNemar p")]
    return Table("paired", f"Paired comparison with `{paired['reference']}`", header, rows,
                 f"Difference predictor - {paired['reference']} on the same records, mean over repetitions, with "
                 "the 95% interval of a paired bootstrap (records resampled, the same resample for both); an "
                 "interval above zero is a win. McNemar p: exact test on the records exactly one of the two gets "
                 "right, the largest p over repetitions.")


def slice_tables(evaluation: Mapping[str, Any]) -> list[Table]:
    tables = []
    for dimension, values in (evaluation.get("slices") or {}).items():
        axes = [a for a in AXES if any(a in scores for by_pred in values.values() for scores in by_pred.values())]
        rows = []
        for value, by_predictor in values.items():
            for name, scores in by_predictor.items():
                rows.append([value, name] + [_slice_cell(scores.get(a)) for a in axes])
        tables.append(Table(f"slice-{dimension}", f"Per {dimension}: accuracy / macro-F1 (scored records; "
                            "shown-label accuracy @ coverage)",
                            [dimension, "predictor", *axes], rows))
    return tables


def all_tables(evaluation: Mapping[str, Any]) -> list[Table]:
    from eval.confusions import error_tables  # it builds on this module's Table

    paired = paired_table(evaluation)
    return [repeated_table(evaluation), *([paired] if paired else []), shown_table(evaluation),
            calibration_table(evaluation),
            *error_tables(evaluation), *slice_tables(evaluation)]


def export_tables(evaluation: Mapping[str, Any], out: Path, stem: str) -> list[str]:
    """CSV and LaTeX of every table of an evaluation under out/tables/; the relative paths written."""
    folder = out / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for table in all_tables(evaluation):
        for suffix, text in ((".csv", table.csv()), (".tex", table.latex())):
            path = folder / f"{stem}-{table.slug}{suffix}"
            path.write_text(text, encoding="utf-8")
            written.append(f"tables/{path.name}")
    return written


def _mean_sd(metrics: Mapping[str, Any], name: str) -> str:
    if not metrics.get("n"):
        return "n/a"
    if "mean" not in metrics:
        return f"{metrics[name]:.3f}"
    return f"{metrics['mean'][name]:.3f} ± {metrics['sd'][name]:.3f}"


def _num(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.3f}"


def _diff(value: float, interval: Sequence[float]) -> str:
    return f"{value:+.3f} [{interval[0]:+.3f}, {interval[1]:+.3f}]"


def shown_table(evaluation: Mapping[str, Any]) -> Table:
    """What the bot shows: beside top-1 accuracy, the accuracy of the labels above the thresholds and their share."""
    header, rows = _mean_rows(evaluation, {"accuracy": "top-1 accuracy", "shown_accuracy": "shown accuracy",
                                           "coverage": "coverage"})
    return Table("shown", "What the bot shows: accuracy of the labels at or above the policy's thresholds, and "
                 "their coverage (mean over repetitions)", header, rows,
                 "Top-1 accuracy: the first label of the ranking, always; shown accuracy: the accuracy of the "
                 "labels the bot would print (calibrated confidence at or above the axis threshold); coverage: the "
                 "share of records given one. Without calibration (--no-calibrate) the last two mean nothing.")


def _slice_cell(scores: Mapping[str, Any] | None) -> str:
    if not scores:
        return "-"
    shown = scores.get("shown_accuracy")
    tail = f"; shown {shown:.3f} @ {scores['coverage']:.2f}" if shown is not None and "coverage" in scores else ""
    return f"{scores['accuracy']:.3f} / {scores['macro_f1']:.3f} ({scores['n']}{tail})"


def _plain(cell: str) -> str:
    return cell.replace("`", "")


def _tex(cell: str) -> str:
    text = _plain(cell).replace("±", "$\\pm$").replace("Δ", "$\\Delta$")
    return re.sub(r"([_%&#])", r"\\\1", text)


def _mean_rows(evaluation: Mapping[str, Any], metrics: Mapping[str, str]) -> tuple[list[str], list[list[str]]]:
    """A header and one row per predictor: each metric's mean over repetitions, per scored axis."""
    axes = scored_axes(evaluation)
    rows = [[name] + [_num(predictor["axes"][axis].get("mean", {}).get(key)) for axis in axes for key in metrics]
            for name, predictor in evaluation["predictors"].items()]
    return ["predictor"] + [f"{a} {label}" for a in axes for label in metrics.values()], rows
