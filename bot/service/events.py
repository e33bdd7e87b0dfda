"""The service's domain types: what GitHub told us, what is queued, what was decided. No GitHub shapes."""

from __future__ import annotations

from pydantic import BaseModel

from bot.domain import Issue


class Comment(BaseModel):
    """A comment on an issue, reduced to what the bot needs."""

    id: int
    body: str
    author: str
    author_is_bot: bool = False
    author_association: str | None = None


class WebhookEvent(BaseModel):
    """One delivery about one issue, parsed out of GitHub's payload by `github.parse_event`."""

    event: str
    action: str
    repo: str
    number: int
    installation_id: int | None = None
    sender: str
    sender_is_bot: bool = False
    is_pull_request: bool = False
    issue: Issue
    issue_state: str = "open"
    issue_labels: list[str] = []
    comment: Comment | None = None

    @property
    def issue_key(self) -> str:
        return f"{self.repo}#{self.number}"


class IssueSnapshot(BaseModel):
    """An issue as the API shows it now (fresher than the payload of a delayed job)."""

    issue: Issue
    state: str
    is_pull_request: bool
    labels: list[str]

    @classmethod
    def from_event(cls, event: WebhookEvent) -> IssueSnapshot:
        return cls(issue=event.issue, state=event.issue_state, is_pull_request=event.is_pull_request,
                   labels=event.issue_labels)


class PostedComment(BaseModel):
    """The bot's comment after an upsert: its id and whether GitHub saw a write."""

    id: int
    created: bool
    changed: bool


class Job(BaseModel):
    """One unit of work: the delivery it came from, its status and its retry bookkeeping."""

    id: int
    delivery_id: str
    event: str
    action: str
    issue_key: str
    status: str
    attempts: int
    last_error: str | None = None
    received_at: float
    lease_token: str | None = None  # the claim this copy was taken under; outcome writes need it


class Decision(BaseModel):
    """What the bot decided for one delivery; shown at /decisions (shadow mode) and kept for audit."""

    delivery_id: str
    repo: str
    number: int
    event: str
    action: str
    shadow: bool
    posted: bool
    comment_id: int | None = None
    labels_added: list[str] = []
    predictions: dict[str, dict[str, object]]
    neighbours: list[dict[str, object]]
    related: list[dict[str, object]] = []  # issues of the same repository, from its memory
    repo_labels: list[tuple[str, float]] = []  # the repository's own labels its label model suggests
    comment: str
    created_at: float = 0.0
