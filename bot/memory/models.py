"""The memory's records: an issue as the memory keeps it, and where a repository's history sync stands."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bot.core.domain import ErrorSignature


class ListedIssue(BaseModel):
    """An issue or pull request as GitHub lists it (REST listing or webhook payload), in the fields the memory
    reads; GitHub's JSON is read into it in `bot/service/github/issues.py` only."""

    model_config = ConfigDict(frozen=True)

    number: int
    title: str = ""
    body: str = ""
    state: str = "open"
    state_reason: str | None = None
    labels: tuple[str, ...] = ()
    is_pull_request: bool = False
    created_at: float | None = None  # seconds since the epoch
    closed_at: float | None = None
    updated_at: float | None = None


class MemoryIssue(BaseModel):
    """One issue or pull request of a repository as the memory keeps it."""

    repo: str
    number: int
    type: str = "issue"  # "issue" | "pull_request"
    title: str
    state: str = "open"
    state_reason: str | None = None  # completed | not_planned | duplicate | reopened
    labels: list[str] = Field(default_factory=list)
    created_at: float
    closed_at: float | None = None
    closed_by: str | None = None  # "#4290" (a pull request) or a commit sha
    duplicate_of: int | None = None
    text_hash: str
    signatures: tuple[ErrorSignature, ...] = ()  # the error signatures that name its failure (MATCHING_KINDS)
    source_updated_at: float | None = None  # GitHub's `updated_at` of the JSON it was read from (None: unknown)


class SyncCursor(BaseModel):
    """Where a repository's history sync stands: the next page to read (oldest first) and the count so far."""

    repo: str
    installation_id: int | None = None
    page: int = 1
    synced: int = 0
    status: str = "running"  # running | done | failed
    since: str | None = None
    error: str | None = None
    started_at: float = 0.0
    updated_at: float = 0.0
