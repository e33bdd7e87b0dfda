"""PNG figures of a results object: confusion matrices, accuracy-coverage curves, per-class F1 bars, reliability."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from bot.core.settings import AXES

DPI = 120
LINE_STYLES: list[Any] = ["-", "--", "-.", (0, (1, 1)), "-", (0, (5, 1, 1, 1, 1, 1))]
Metrics = Mapping[str, Any]


def reference_predictor(predictors: Sequence[str]) -> str:
    """The predictor whose confusion matrices are drawn: the shipped default when it ran, else the last."""
    return "default" if "default" in predictors else predictors[-1]


def save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(figure)
    return path


def confusion_figure(metrics: Metrics, title: str) -> Figure:
    """Counts in the cells; colour = share of the gold row, so rare classes stay visible."""
    labels = metrics["confusion"]["labels"]
    matrix = np.asarray(metrics["confusion"]["matrix"], dtype=float)
    shares = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    size = max(4.5, 0.42 * len(labels) + 2.5)
    figure, ax = plt.subplots(figsize=(size + 1, size))
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(len(labels)), labels)
    for (i, j), count in np.ndenumerate(matrix):
        if count:
            ax.text(j, i, str(int(count)), ha="center", va="center", fontsize=8,
                    color="white" if shares[i, j] > 0.6 else "black")
    ax.set_xlabel("predicted (top-1)")
    ax.set_ylabel("gold")
    ax.set_title(title, fontsize=10)
    figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of gold row")
    return figure


def coverage_figure(by_predictor: Mapping[str, Mapping[str, Metrics]], title: str) -> Figure:
    """Accuracy against coverage per axis, one line per predictor; a dot at the configured threshold."""
    axes_shown = [a for a in AXES if any(m[a].get("n") for m in by_predictor.values())]
    figure, grid = _axis_panels(len(axes_shown), panel_height=3.6)
    colours = _colours(list(by_predictor))
    for panel, axis in zip(grid.flat, axes_shown, strict=False):
        for k, (name, metrics) in enumerate(by_predictor.items()):
            curve = metrics[axis].get("curve") or []
            if not curve:
                continue
            # A dash pattern per predictor, earlier ones on top: identical curves (default = linear) stay visible.
            panel.plot([p["coverage"] for p in curve], [p["accuracy"] for p in curve], color=colours[name],
                       label=name, linewidth=1.8, linestyle=LINE_STYLES[k % len(LINE_STYLES)],
                       zorder=10 - k, marker="." if len(curve) < 40 else None, markersize=4)
            if metrics[axis].get("precision_at_threshold") is not None:
                panel.plot(metrics[axis]["coverage_at_threshold"], metrics[axis]["precision_at_threshold"], "o",
                           color=colours[name], markersize=6)
        panel.set_title(f"{axis} (n={_n(by_predictor, axis)})", fontsize=10)
        panel.set_xlim(0, 1.02)
        panel.set_ylim(0, 1.02)
        panel.set_xlabel("coverage")
        panel.set_ylabel("accuracy")
        panel.grid(alpha=0.3)
    handles, names = grid.flat[0].get_legend_handles_labels()
    figure.legend(handles, names, loc="lower right", title="predictor (dot: configured threshold)", fontsize=9)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure


def f1_bars_figure(by_predictor: Mapping[str, Mapping[str, Metrics]], axis: str, title: str) -> Figure:
    """Per-class F1, one bar per predictor, classes ordered by gold support (largest on top)."""
    support: dict[str, int] = {}
    for metrics in by_predictor.values():
        for label, row in metrics[axis].get("per_class", {}).items():
            support[label] = max(support.get(label, 0), row["support"])
    classes = sorted(support, key=lambda c: (-support[c], c))
    names = list(by_predictor)
    height = 0.8 / max(len(names), 1)
    figure, ax = plt.subplots(figsize=(8, 1.2 + len(classes) * (0.1 * len(names) + 0.12)))
    colours = _colours(names)
    positions = np.arange(len(classes))
    for k, name in enumerate(names):
        per_class = by_predictor[name][axis].get("per_class", {})
        values = [per_class.get(c, {}).get("f1", 0.0) for c in classes]
        ax.barh(positions + k * height, values, height=height, color=colours[name], label=name)
    ax.set_yticks(positions + height * (len(names) - 1) / 2, [f"{c} (n={support[c]})" for c in classes])
    ax.set_ylim(len(classes) - height / 2 - 0.1, -height / 2 - 0.1)
    ax.set_xlim(0, 1)
    ax.set_xlabel("F1")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="predictor")
    return figure


def heatmap_figure(matrix: Sequence[Sequence[int]], rows: Sequence[str], columns: Sequence[str], title: str,
                   max_columns: int = 30) -> Figure:
    """Counts of row x column; beyond `max_columns` columns (by total) the rest are summed as `(other)`."""
    counts = np.asarray(matrix, dtype=float).reshape(len(rows), len(columns))
    names = list(columns)
    if len(names) > max_columns:
        order = np.argsort(-counts.sum(axis=0), kind="stable")
        keep, rest = order[: max_columns - 1], order[max_columns - 1:]
        counts = np.column_stack([counts[:, keep], counts[:, rest].sum(axis=1)])
        names = [names[i] for i in keep] + [f"(other: {len(rest)} patterns)"]
    figure, ax = plt.subplots(figsize=(2.5 + 0.38 * len(names), 1.8 + 0.3 * len(rows)))
    image = ax.imshow(counts, cmap="YlOrRd", aspect="auto")
    ax.set_xticks(range(len(names)), names, rotation=50, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    for (i, j), count in np.ndenumerate(counts):
        if count:
            ax.text(j, i, str(int(count)), ha="center", va="center", fontsize=7,
                    color="white" if count > 0.6 * counts.max() else "black")
    ax.set_xlabel("fix pattern")
    ax.set_ylabel("symptom")
    ax.set_title(title, fontsize=10)
    figure.colorbar(image, ax=ax, fraction=0.03, pad=0.02, label="records")
    return figure


def reliability_figure(by_predictor: Mapping[str, Mapping[str, Metrics]], title: str) -> Figure:
    """Per axis, accuracy against mean confidence of each confidence bin; the diagonal is perfect calibration."""
    axes_shown = [a for a in AXES if any(m[a].get("reliability") for m in by_predictor.values())]
    figure, grid = _axis_panels(len(axes_shown), panel_height=3.8)
    colours = _colours(list(by_predictor))
    for ax, axis in zip(grid.flat, axes_shown, strict=False):
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle=":")
        for i, (name, metrics) in enumerate(by_predictor.items()):
            bins = metrics[axis].get("reliability") or []
            if bins:
                ece = metrics[axis].get("mean", {}).get("ece", 0.0)
                ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o", markersize=3,
                        linestyle=LINE_STYLES[i % len(LINE_STYLES)], color=colours[name],
                        label=f"{name} (ECE {ece:.2f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(axis, fontsize=10)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.legend(fontsize=6, loc="upper left")
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure


def write_run_plots(evaluation: Mapping[str, Any], out: Path, stem: str) -> dict[str, list[str]]:
    """Every figure of one evaluation, as file names relative to `out`, grouped by kind."""
    by_predictor = {name: p["axes"] for name, p in evaluation["predictors"].items()}
    reference = reference_predictor(list(by_predictor))
    label = f"{evaluation['name']} ({evaluation['mode']})"
    written: dict[str, list[str]] = {"coverage": [], "confusion": [], "f1": [], "reliability": []}
    written["coverage"].append(save(coverage_figure(by_predictor, f"{label}: accuracy-coverage"),
                                    out / f"{stem}-coverage.png").name)
    if any(m[a].get("reliability") for m in by_predictor.values() for a in AXES):
        written["reliability"].append(save(reliability_figure(by_predictor, f"{label}: reliability (first repetition)"),
                                           out / f"{stem}-reliability.png").name)
    for axis in AXES:
        if not by_predictor[reference][axis].get("n"):
            continue
        title = f"{label}: {axis}, predictor {reference} (rows: gold, columns: predicted top-1)"
        written["confusion"].append(save(confusion_figure(by_predictor[reference][axis], title),
                                         out / f"{stem}-confusion-{axis}.png").name)
        written["f1"].append(save(f1_bars_figure(by_predictor, axis, f"{label}: per-class F1 on {axis}"),
                                  out / f"{stem}-f1-{axis}.png").name)
    return written


def _axis_panels(count: int, panel_height: float, columns: int = 3) -> tuple[Figure, Any]:
    """A grid of panels, one per taxonomy axis shown, three to a row; panels beyond `count` are hidden."""
    rows = max(1, -(-count // columns))
    figure, grid = plt.subplots(rows, columns, figsize=(4.2 * columns, panel_height * rows), squeeze=False)
    for panel in list(grid.flat)[count:]:
        panel.axis("off")
    return figure, grid


def _colours(names: Sequence[str]) -> dict[str, Any]:
    palette = plt.get_cmap("tab10")
    return {name: palette(i % 10) for i, name in enumerate(names)}


def _n(by_predictor: Mapping[str, Mapping[str, Metrics]], axis: str) -> int:
    return max(int(m[axis].get("n", 0)) for m in by_predictor.values())
