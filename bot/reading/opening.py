"""What the App sees when an issue is opened: the opening post of a gold thread window, and its date.

A gold record's `body` is a window of the whole thread: the reporter's opening post (under an
`AUTHOR · description · DATE` header), then `AUTHOR · comment · DATE` (or `review`, `commit`) sections where
maintainers often name the cause and the fix. About a quarter of the windows start mid-thread: they have no
opening post, so they can train a model but cannot be scored as the App would have seen them.
(The cut is the one of `../shared/tools/opening.py`.)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from bot.core.domain import Case

_LATER_SECTION = re.compile(r"^\S+ · (?:comment|review|commit) · \d{4}-\d\d-\d\d\s*$", re.M)
_DESCRIPTION = re.compile(r"· description · (\d{4}-\d\d-\d\d)")
_ANY_SECTION = re.compile(r"^\S+ · (?:description|comment|review|commit) · (\d{4}-\d\d-\d\d)\s*$", re.M)


def has_opening_post(body: str) -> bool:
    """Whether the window holds the reporter's opening post (its `description` header)."""
    return _DESCRIPTION.search(body or "") is not None


def opening_post(body: str) -> str:
    """The body cut at the first later section's header: the opening post, when the window has one."""
    found = _LATER_SECTION.search(body or "")
    return (body[:found.start()].rstrip() if found else body or "")


def opened_at(body: str) -> datetime | None:
    """The opening post's date (UTC midnight) from its `description` header, or None when the window has none."""
    found = _DESCRIPTION.search(body or "")
    return _utc_day(found.group(1)) if found else None


def as_opened(case: Case) -> Case | None:
    """The record as the App sees it when the issue is opened: the opening post alone, dated by its header (the day
    the post itself shows, whatever date the record carried); None when the window starts mid-thread (no opening
    post to predict from)."""
    if not has_opening_post(case.body):
        return None
    return case.model_copy(update={"body": opening_post(case.body), "created_at": opened_at(case.body)})


def case_base_text(cases: list[Case], text: str) -> list[Case]:
    """The case base a model learns from: the windows as stored (`thread`), or (`opened`) each case cut to its
    opening post, the text the App will compare new issues with; a window with no opening post keeps its text."""
    if text == "thread":
        return cases
    return [as_opened(c) or c for c in cases]


def opened_no_later_than(body: str) -> datetime | None:
    """A bound on when the issue was opened: its opening date, else the earliest date the window shows (an issue
    is opened before any of its comments), else None."""
    exact = opened_at(body)
    if exact is not None:
        return exact
    dates = _ANY_SECTION.findall(body or "")
    return _utc_day(min(dates)) if dates else None


def _utc_day(day: str) -> datetime:
    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
