"""GitHub's issue JSON (REST listing or webhook payload) as a memory record, and the text that is embedded."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from bot.core.domain import Issue
from bot.memory.store import MemoryIssue
from bot.models.embedding import Embedder, text_hash
from bot.reading.normalise import NormalisedIssue, normalise
from bot.reading.signatures import MATCHING_KINDS


def issue_text(data: dict[str, Any]) -> str:
    """The text embedded for an issue: the engine's normalised title and body (so the embedding cache is shared)."""
    return _normalised(data).text


def _normalised(data: dict[str, Any]) -> NormalisedIssue:
    return normalise(Issue(title=str(data.get("title") or ""), body=str(data.get("body") or "")))


def memory_issue(repo: str, data: dict[str, Any], closed_by: str | None = None,
                 duplicate_of: int | None = None) -> MemoryIssue:
    """The record of one issue JSON: the body is hashed, never kept; of its failure, only the error signatures
    that name it (MATCHING_KINDS: not a bare signal or exit code) are kept, as canonical text."""
    state = str(data.get("state") or "open")
    normalised = _normalised(data)
    return MemoryIssue(
        repo=repo, number=int(data["number"]), type="pull_request" if data.get("pull_request") else "issue",
        title=str(data.get("title") or ""), state=state,
        state_reason=data.get("state_reason") if state == "closed" else None,
        labels=[str(label["name"]) for label in data.get("labels") or [] if isinstance(label, dict)],
        created_at=timestamp(data.get("created_at")) or 0.0, closed_at=timestamp(data.get("closed_at")),
        closed_by=closed_by, duplicate_of=duplicate_of, text_hash=text_hash(normalised.text),
        signatures=tuple(s for s in normalised.signatures if s.kind in MATCHING_KINDS),
        source_updated_at=timestamp(data.get("updated_at")))


def embed_records(embedder: Embedder, items: list[dict[str, Any]]) -> np.ndarray:
    """One unit-norm vector per issue JSON, in order (cached texts are not embedded again)."""
    return embedder.embed([issue_text(d) for d in items])


def timestamp(value: object) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None
