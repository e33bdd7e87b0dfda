"""The memory as the service uses it: related issues of the same repository, and neighbours' titles."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from bot.comment.links import issue_html_url
from bot.core.domain import ErrorSignature, Neighbour, RelatedIssue, TriageResult
from bot.core.settings import Settings
from bot.memory.index import MemoryIndex
from bot.memory.labels import LabelModel, LabelModels
from bot.memory.store import MemoryIssue, MemoryStore
from bot.memory.titles import cache_title, cached_title
from bot.reading.signatures import MATCHING_KINDS

log = logging.getLogger(__name__)

CASE_ID = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)#(?P<number>\d+)$")


@dataclass
class Memory:
    """The memory's store and its in-memory index, shared by the worker's jobs."""

    store: MemoryStore
    index: MemoryIndex
    labels: LabelModels

    def label_model(self, repo: str) -> LabelModel:
        """The repository's label model as it stands; refitted outside the triage job (see `LabelModels`)."""
        return self.labels.current(repo)

    @classmethod
    def open(cls, settings: Settings) -> Memory:
        store = MemoryStore(settings.sqlite_url)
        return cls(store, MemoryIndex(store, settings.memory_max_rows),
                   LabelModels(store.vectors, store.count, max_rows=settings.memory_max_rows))

    def close(self) -> None:
        self.store.close()

    def forget_repo(self, repo: str) -> list[str]:
        """Everything of `repo` goes (its index and label model here, its rows in the database); returns the
        text hashes of its issues, for the embedding cache to forget too."""
        self.index.forget(repo)
        self.labels.forget(repo)
        return self.store.delete_repo(repo)


def related_issues(memory: Memory, settings: Settings, repo: str, number: int | None, vector: np.ndarray,
                   signatures: Sequence[ErrorSignature] = (), before: float | None = None) -> list[RelatedIssue]:
    """Issues of `repo` (and of no other repository): first those that share one of the issue's error signatures
    naming its failure, whatever their cosine, then the closest above the similarity floor; at most the max.
    Each sharing one carries the first it shares (the issue's signatures come most telling first)."""
    k = settings.memory_related_max
    matching = [s for s in signatures if s.kind in MATCHING_KINDS]
    shared = memory.store.sharing(repo, [s.digest for s in matching], exclude=number, before=before)
    sharing = memory.index.scored(repo, vector, shared)[:k] if shared else []
    taken = {issue.number for issue, _ in sharing}
    floor = min(settings.memory_related_floor, settings.memory_question_floor)  # the comment applies its own
    close = [(issue, score) for issue, score in memory.index.search(repo, vector, k, exclude=number, before=before)
             if score >= floor and issue.number not in taken]
    return [as_related(issue, score, settings.github_api_url, settings.memory_duplicate_floor,
                       shared_signature(issue, matching)) for issue, score in [*sharing, *close][:k]]


def shared_signature(issue: MemoryIssue, signatures: Sequence[ErrorSignature]) -> str | None:
    """The canonical text of the first of `signatures` that `issue` shows too, if any."""
    held = {s.digest for s in issue.signatures}
    return next((s.text for s in signatures if s.digest in held), None)


def repo_label_suggestions(memory: Memory, repo: str, vector: np.ndarray) -> list[tuple[str, float]]:
    """The repository's own labels its model suggests (never a "duplicate" label: the bot does not judge that)."""
    return [(name, round(score, 4)) for name, score in memory.label_model(repo).suggest(vector)
            if "duplicate" not in name.casefold()]


def as_related(issue: MemoryIssue, score: float, api_url: str, duplicate_floor: float,
               signature: str | None = None) -> RelatedIssue:
    # GitHub redirects /issues/N to /pull/N for a pull request, so one address form serves both.
    return RelatedIssue(
        repo=issue.repo, number=issue.number, url=issue_html_url(api_url, issue.repo, issue.number),
        title=issue.title, type=issue.type, state=issue.state, state_reason=issue.state_reason,
        closed_by=issue.closed_by, duplicate_of=issue.duplicate_of, labels=issue.labels, score=round(score, 4),
        possible_duplicate=issue.type == "issue" and issue.state == "open" and score >= duplicate_floor,
        signature=signature, created_at=datetime.fromtimestamp(issue.created_at, UTC) if issue.created_at else None)


class IssueLookup(Protocol):
    def lookup(self, repo: str, number: int) -> tuple[str | None, str | None, str | None]:
        """(title, type, state) of an issue as GitHub says now."""
        ...


def with_titles(result: TriageResult, store: MemoryStore, lookup: IssueLookup | None, ttl_s: float
                ) -> TriageResult:
    """The result with each pack neighbour's title, type and state as GitHub returns them (cached, TTL);
    without a client (offline) they stay None and the comment shows links and labels only."""
    if lookup is None:
        return result
    neighbours: list[Neighbour] = []
    for n in result.neighbours:
        match = CASE_ID.match(n.id)
        if match is None:
            neighbours.append(n)
            continue
        cached = cached_title(store, n.id, ttl_s)
        if cached is None:
            try:
                title, type_, state = lookup.lookup(match["repo"], int(match["number"]))
            except Exception as exc:  # a title is a nicety: a failed read leaves the link, and is not cached
                log.warning("title of %s not read: %s", n.id, exc)
                neighbours.append(n)
                continue
            cache_title(store, n.id, title, type_, state)
        else:
            title, type_, state = cached.title, cached.type, cached.state
        neighbours.append(n.model_copy(update={"title": title or n.title, "type": type_ or n.type,
                                               "state": state or n.state}))
    return result.model_copy(update={"neighbours": neighbours})
