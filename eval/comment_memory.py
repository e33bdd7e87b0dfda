"""The repository memory of `python -m eval comments --memory`: the deployed App's "Seen before", measured.

Each evaluated repository's gold threads go into the real memory store (bot/memory/) on a temporary SQLite, as
GitHub would list them: the opening post as the body (the window cut at its first later section, bot/reading/opening.py;
a window without one keeps only its title), its opening date and state. An issue then recalls the
threads of its repository opened before it (`related_issues(..., before=created_at)`), exactly as the service's
triage job does.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bot.core.domain import Case, RelatedIssue
from bot.core.settings import Settings
from bot.memory.index import MemoryIndex
from bot.memory.labels import LabelModels
from bot.memory.models import ListedIssue
from bot.memory.queries import Memory, related_issues
from bot.memory.records import embed_records, memory_issue
from bot.memory.store import MemoryStore
from bot.models.embedding import Embedder
from bot.reading.normalise import normalise
from bot.reading.opening import has_opening_post, opening_post


def as_listed_issue(case: Case) -> ListedIssue:
    """A gold thread as GitHub lists it when the memory syncs: the opening post, never the thread."""
    body = opening_post(case.body) if has_opening_post(case.body) else ""
    return ListedIssue(number=int(case.number or 0), title=case.title, body=body, state=case.state or "closed",
                       labels=(),  # a case keeps no GitHub labels; the comment does not read them
                       created_at=case.created_at.timestamp() if case.created_at else None,
                       is_pull_request=case.type == "pull_request")


@contextmanager
def gold_memory(cases: Sequence[Case], embedder: Embedder, settings: Settings) -> Iterator[Memory]:
    """The real memory store, on a temporary SQLite, holding `cases` (those with a repository and a number)."""
    kept = {(c.repo, c.number): c for c in cases if c.repo and c.number is not None}
    with tempfile.TemporaryDirectory(prefix="eval-memory-") as folder:
        store = MemoryStore(f"sqlite:///{Path(folder) / 'memory.sqlite3'}")
        try:
            items = [as_listed_issue(c) for c in kept.values()]
            if items:
                vectors = embed_records(embedder, items)
                store.upsert([(memory_issue(str(c.repo), data), vector)
                              for c, data, vector in zip(kept.values(), items, vectors, strict=True)])
            yield Memory(store, MemoryIndex(store, settings.memory_max_rows), LabelModels(store.vectors, store.count))
        finally:
            store.close()


def recalled(memory: Memory, settings: Settings, embedder: Embedder, issue: Case) -> list[RelatedIssue]:
    """The issues of its repository the memory recalls for `issue` (opened before it), as the service does."""
    if not issue.repo:
        return []
    normalised = normalise(issue)
    vector = embedder.embed([normalised.text])[0]
    before = issue.created_at.timestamp() if issue.created_at else None
    return related_issues(memory, settings, issue.repo, issue.number, vector, normalised.signatures, before=before)
