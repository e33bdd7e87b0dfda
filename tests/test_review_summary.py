"""The review page's summary, computed from stored decisions, ratings and corrections: the shares, the
agreement per day and its plot, and the backtest's table."""

from __future__ import annotations

from bot.memory.backtest import BacktestResult
from bot.service.decisions.models import Decision
from bot.service.review.records import Rating
from bot.service.review.summary import agreement_svg, backtest_html, summarise

DAY_S = 86400.0


def decision(n: int, at: float, posted: bool, symptom: str | None, comment: str | None = "c") -> Decision:
    return Decision(delivery_id=f"d{n}@{int(at)}", repo="o/r", number=n, event="issues", action="opened",
                    shadow=not posted, posted=posted, comment=comment, created_at=at, neighbours=[],
                    predictions={"symptom": {"label": symptom, "confidence": 0.7, "top": [], "corrected": False},
                                 "kind": {"label": "bug_report", "confidence": 0.9, "top": [], "corrected": False}})


def test_shares_count_each_issue_once_as_its_latest_decision_showed_it() -> None:
    t0 = 1_700_000_000.0
    decisions = [decision(1, t0, True, "hang_timeout"), decision(1, t0 + 60, True, "out_of_memory"),
                 decision(2, t0 + DAY_S, False, "hang_timeout"), decision(3, t0 + DAY_S, False, None, None)]
    corrections = [{"number": 1, "axis": "symptom", "value": "out_of_memory"},  # agrees with the latest
                   {"number": 2, "axis": "symptom", "value": "communication_error"}]
    ratings = {f"d1@{int(t0 + 60)}": Rating(useful=2, not_useful=1),
               f"d1@{int(t0)}": Rating(useful=1, not_useful=1)}
    summary = summarise(decisions, ratings, corrections)
    assert (summary.decisions, summary.posted, summary.shadow) == (4, 2, 1)
    assert (summary.rated, summary.useful, summary.useful_share) == (1, 1, 1.0)  # a tie is no verdict
    symptom = next(a for a in summary.axes if a.axis == "symptom")
    assert (symptom.shown, symptom.corrected, symptom.share) == (2, 1, 0.5)
    assert [(day, round(share, 2), n) for day, share, n in summary.agreement] == [
        ("2023-11-14", 1.0, 2), ("2023-11-15", 0.67, 3)]
    svg = agreement_svg(summary)
    assert svg is not None and svg.startswith("<svg") and "</svg>" in svg and "<script" not in svg


def test_no_plot_for_one_day_and_the_backtest_table_as_html() -> None:
    assert agreement_svg(summarise([decision(1, 1_700_000_000.0, True, "hang_timeout")], {}, [])) is None
    result = BacktestResult(repo="o/r", replayed=60, history=140, related_floor=0.8, label_precision=0.9,
                            label_coverage=0.5, per_label={}, duplicates=0, duplicates_found=0, related_rate=0.4,
                            related_shares_label=None, seconds_per_issue=0.01)
    html = backtest_html(result.summary())
    assert "<table>" in html and "<td>60 (history before them: 140)</td>" in html and "90%" in html
