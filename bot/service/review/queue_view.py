"""The data behind the queue and the summary of one repository, read in one go (in a worker thread)."""

from __future__ import annotations

from typing import Any

from bot.core.settings import AXES
from bot.service.review import records
from bot.service.review.html_cache import comment_html
from bot.service.review.summary import agreement_svg, backtest_html, summarise
from bot.service.review.taxonomy import review_taxonomy
from bot.service.review.view import OUTCOMES, matches, row_of
from bot.service.state import ServiceState

SCAN = 2000  # the latest decisions a filter looks through


def queue_context(state: ServiceState, repo: str, outcome: str, axis: str, value: str, limit: int
                  ) -> dict[str, Any]:
    store = state.store
    filtered = bool(outcome or axis)
    decisions = records.latest_decisions(store, repo, SCAN if filtered else limit)
    silent_reasons = sorted({d.outcome for d in decisions if d.outcome.startswith("silent:")})
    axis = axis if axis in AXES else ""
    chosen = [d for d in decisions if matches(d, outcome or None, axis or None, value or None)][:limit]
    ratings = records.ratings(store, repo)
    corrected: dict[int, dict[str, str]] = {}
    for c in records.corrections_of(store, repo):
        corrected.setdefault(int(c["number"]), {})[str(c["axis"])] = str(c["value"])
    html = comment_html(store, chosen)
    rows = [row_of(d, state.settings.github_api_url, ratings.get(d.delivery_id), corrected.get(d.number, {}),
                   html.get(d.delivery_id)) for d in chosen]
    taxonomy = review_taxonomy(state.settings.taxonomy)
    return {"rows": rows, "total": records.count_decisions(store, repo), "outcomes": OUTCOMES,
            "silent_reasons": silent_reasons,
            "axes": AXES, "values": {a: list(taxonomy.ids(a)) for a in AXES},
            "filters": {"outcome": outcome, "axis": axis, "value": value, "limit": limit},
            "can_post": state.github is not None}


def summary_context(state: ServiceState, repo: str) -> dict[str, Any]:
    store = state.store
    decisions = records.latest_decisions(store, repo, 1_000_000)
    summary = summarise(decisions, records.ratings(store, repo), records.corrections_of(store, repo))
    backtest = records.latest_backtest(store, repo)
    return {"summary": summary, "plot": agreement_svg(summary),
            "backtest": (backtest[0], backtest_html(backtest[1])) if backtest else None}
