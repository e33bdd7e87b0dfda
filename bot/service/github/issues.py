"""GitHub's issue JSON (REST listing or webhook payload) read into the memory's `ListedIssue`: the one reader of
that shape, for the history sync, the issue webhooks and the tools that seed a memory."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.memory.models import ListedIssue


def listed_issue(data: dict[str, Any]) -> ListedIssue:
    """One issue JSON as the memory reads it; a missing or unreadable `number` raises (KeyError, ValueError)."""
    reason = data.get("state_reason")
    return ListedIssue(
        number=int(str(data["number"])), title=str(data.get("title") or ""), body=str(data.get("body") or ""),
        state=str(data.get("state") or "open"), state_reason=reason if isinstance(reason, str) else None,
        labels=tuple(str(label["name"]) for label in data.get("labels") or [] if isinstance(label, dict)),
        is_pull_request=bool(data.get("pull_request")), created_at=timestamp(data.get("created_at")),
        closed_at=timestamp(data.get("closed_at")), updated_at=timestamp(data.get("updated_at")))


def timestamp(value: object) -> float | None:
    """GitHub's ISO 8601 time (or a datetime) as seconds since the epoch; None when absent."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None
