"""The backtest's files: backtest.json, report.md (opening with a table read in ten seconds) and plots."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bot.memory.backtest import BacktestResult


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def write_report(result: BacktestResult, out: Path) -> list[Path]:
    """Write the three outputs into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    data = result.summary() | {"issues": [asdict(r) for r in result.issues]}
    paths = [out / "backtest.json", out / "report.md", *_plots(result, out)]
    paths[0].write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(result, [p.name for p in paths[2:]]), encoding="utf-8")
    return paths


def markdown(result: BacktestResult, plots: list[str]) -> str:
    dup = (f"{result.duplicates_found} of {result.duplicates}" if result.duplicates else "none closed as duplicate")
    lines = [
        f"# Backtest of ddl-triage on {result.repo}",
        "",
        "| What the App would have done | Result |",
        "|---|---|",
        f"| Issues replayed (each seeing only earlier issues) | {result.replayed} (history before them: "
        f"{result.history}) |",
        f"| Label suggestions that maintainers also applied (precision) | {_pct(result.label_precision)} |",
        f"| Issues that got at least one label suggestion (coverage) | {_pct(result.label_coverage)} |",
        f"| Duplicates whose original was among the related issues | {dup} |",
        f"| Issues with a related issue above similarity {result.related_floor:.2f} | "
        f"{_pct(result.related_rate)} |",
        f"| ... whose top related issue shares a maintainer label | {_pct(result.related_shares_label)} |",
        f"| Seconds per issue (from the synced memory) | {result.seconds_per_issue:.4f} |",
        "",
        "Labels are suggested only where the repository's own history has at least 5 examples and a vote",
        "threshold reached 80% precision on that history; otherwise the App says nothing.",
        "",
        "## Per label",
        "",
        "| Label | Suggested | Precision | Recall |",
        "|---|---|---|---|",
        *[f"| {name} | {int(v['suggested'])} | {_pct(v['precision'])} | {_pct(v['recall'])} |"
          for name, v in result.per_label.items()],
        "",
        *[f"![{name}]({name})" for name in plots],
        "",
    ]
    return "\n".join(lines)


def _plots(result: BacktestResult, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    if result.per_label:
        fig, ax = plt.subplots(figsize=(7, 0.4 * len(result.per_label) + 1.5))
        names = list(result.per_label)
        ax.barh(names, [result.per_label[n]["precision"] for n in names], label="precision")
        ax.barh(names, [result.per_label[n]["recall"] for n in names], alpha=0.5, label="recall")
        ax.set_xlim(0, 1)
        ax.legend()
        ax.set_title("Label suggestions per label")
        fig.tight_layout()
        paths.append(out / "labels.png")
        fig.savefig(paths[-1])
        plt.close(fig)
    scores = [s for r in result.issues for _, s in r.related[:1]]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(scores or [0.0], bins=20, range=(result.related_floor, 1.0))
    ax.set_xlabel("similarity of the top related issue")
    ax.set_ylabel("issues")
    fig.tight_layout()
    paths.append(out / "related.png")
    fig.savefig(paths[-1])
    plt.close(fig)
    return paths
