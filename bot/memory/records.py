"""An issue as GitHub lists it (`ListedIssue`) as a memory record, and the text that is embedded."""

from __future__ import annotations

import numpy as np

from bot.core.domain import Issue
from bot.memory.models import ListedIssue
from bot.memory.store import MemoryIssue
from bot.models.embedding import Embedder, text_hash
from bot.reading.normalise import NormalisedIssue, normalise
from bot.reading.signatures import MATCHING_KINDS


def issue_text(issue: ListedIssue) -> str:
    """The text embedded for an issue: the engine's normalised title and body (so the embedding cache is shared)."""
    return normalised(issue).text


def normalised(issue: ListedIssue) -> NormalisedIssue:
    return normalise(Issue(title=issue.title, body=issue.body))


def memory_issue(repo: str, issue: ListedIssue, closed_by: str | None = None,
                 duplicate_of: int | None = None) -> MemoryIssue:
    """The record of one listed issue: the body is hashed, never kept; of its failure, only the error signatures
    that name it (MATCHING_KINDS: not a bare signal or exit code) are kept, as canonical text."""
    return memory_record(repo, issue, closed_by, duplicate_of)[0]


def memory_record(repo: str, issue: ListedIssue, closed_by: str | None = None,
                  duplicate_of: int | None = None) -> tuple[MemoryIssue, str]:
    """The record of one listed issue and the text to embed for it, the issue read (normalised) once."""
    read = normalised(issue)
    record = MemoryIssue(
        repo=repo, number=issue.number, type="pull_request" if issue.is_pull_request else "issue",
        title=issue.title, state=issue.state, state_reason=issue.state_reason if issue.state == "closed" else None,
        labels=list(issue.labels), created_at=issue.created_at or 0.0, closed_at=issue.closed_at,
        closed_by=closed_by, duplicate_of=duplicate_of, text_hash=text_hash(read.text),
        signatures=tuple(s for s in read.signatures if s.kind in MATCHING_KINDS),
        source_updated_at=issue.updated_at)
    return record, read.text


def embed_records(embedder: Embedder, items: list[ListedIssue]) -> np.ndarray:
    """One unit-norm vector per listed issue, in order (cached texts are not embedded again)."""
    return embedder.embed([issue_text(d) for d in items])
