"""A repository's summary on the review page: how many decisions, how many posted, how many of the posted
comments people found useful, per axis how many shown labels maintainers corrected, the agreement over time
(a plot), and the table of the latest backtest when one was run."""

from __future__ import annotations

import io
import time
from collections import defaultdict
from typing import Any

from pydantic import BaseModel

from bot.core.settings import AXES
from bot.memory.backtest import BacktestResult
from bot.memory.report import markdown as backtest_markdown
from bot.service.decisions.models import Decision
from bot.service.review.records import Rating
from bot.service.review.view import render_markdown

DAY_S = 86400.0


class AxisShare(BaseModel):
    axis: str
    shown: int
    corrected: int

    @property
    def share(self) -> float | None:
        return self.corrected / self.shown if self.shown else None


class Summary(BaseModel):
    decisions: int
    posted: int
    shadow: int
    rated: int  # posted decisions with a Useful / Not useful verdict
    useful: int
    axes: list[AxisShare]
    agreement: list[tuple[str, float, int]]  # (day, share of shown labels not corrected, labels shown that day)

    @property
    def posted_share(self) -> float | None:
        return self.posted / self.decisions if self.decisions else None

    @property
    def useful_share(self) -> float | None:
        return self.useful / self.rated if self.rated else None


def summarise(decisions: list[Decision], ratings: dict[str, Rating], corrections: list[dict[str, Any]]) -> Summary:
    """The summary of one repository's stored decisions. A label counts as corrected when a maintainer set that
    axis of the issue to another value (on the page or with `/triage`); each issue counts once per axis, as its
    latest decision showed it."""
    corrected: dict[tuple[int, str], str] = {(int(c["number"]), str(c["axis"])): str(c["value"]) for c in corrections}
    latest: dict[int, Decision] = {}
    for decision in sorted(decisions, key=lambda d: d.created_at):
        latest[decision.number] = decision
    shown: dict[str, int] = defaultdict(int)
    changed: dict[str, int] = defaultdict(int)
    per_day: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # day -> [agreed, shown]
    for decision in latest.values():
        day = time.strftime("%Y-%m-%d", time.gmtime(decision.created_at))
        for axis, label in _shown(decision).items():
            wrong = (decision.number, axis) in corrected and corrected[(decision.number, axis)] != label
            shown[axis] += 1
            changed[axis] += int(wrong)
            per_day[day][0] += int(not wrong)
            per_day[day][1] += 1
    posted = [d for d in decisions if d.posted]
    verdicts = [ratings[d.delivery_id].verdict for d in posted if d.delivery_id in ratings]
    return Summary(decisions=len(decisions), posted=len(posted),
                   shadow=sum(1 for d in decisions if not d.posted and d.comment is not None),
                   rated=sum(1 for v in verdicts if v is not None), useful=sum(1 for v in verdicts if v),
                   axes=[AxisShare(axis=a, shown=shown[a], corrected=changed[a]) for a in AXES],
                   agreement=[(day, agreed / n, n) for day, (agreed, n) in sorted(per_day.items())])


def _shown(decision: Decision) -> dict[str, str]:
    """The labels a decision showed (an axis that abstained shows none; a maintainer's own value is no guess)."""
    return {axis: str(p["label"]) for axis, p in decision.predictions.items()
            if p.get("label") is not None and not p.get("corrected")}


def agreement_svg(summary: Summary) -> str | None:
    """The agreement over time as an inline SVG (matplotlib, no pyplot state), or None with fewer than 2 days."""
    if len(summary.agreement) < 2:
        return None
    from matplotlib.dates import DateFormatter, datestr2num
    from matplotlib.figure import Figure

    days = [datestr2num(day) for day, _, _ in summary.agreement]
    figure = Figure(figsize=(7.0, 2.6), dpi=100)
    axes = figure.add_subplot()
    axes.plot(days, [100 * share for _, share, _ in summary.agreement], marker="o", color="#1f6feb")
    axes.set_ylim(0, 105)
    axes.set_ylabel("labels kept (%)")
    axes.set_title("Agreement: shown labels that maintainers did not correct, per day", fontsize=10)
    axes.xaxis.set_major_formatter(DateFormatter("%m-%d"))
    axes.grid(alpha=0.3)
    figure.tight_layout()
    out = io.StringIO()
    figure.savefig(out, format="svg")
    svg = out.getvalue()
    return svg[svg.index("<svg"):]


def backtest_html(summary: dict[str, Any]) -> str:
    """The backtest's ten-second table (as `ddl-triage backtest` writes it in report.md), as HTML."""
    fields = set(BacktestResult.__dataclass_fields__) - {"issues"}
    result = BacktestResult(**{k: v for k, v in summary.items() if k in fields})
    return render_markdown(backtest_markdown(result, []))
