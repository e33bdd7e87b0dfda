"""What GitHub told us, as domain types: a delivery's event, an issue as the API shows it, a comment. No
GitHub shapes here: `payloads` and `client` translate them."""

from __future__ import annotations

from pydantic import BaseModel

from bot.core.domain import Issue

# The collaborator roles (GitHub's `role_name`) that may triage: command the bot, vote on the review page, sign in
# to it; read, none and custom roles may not.
TRIAGE_ROLES = frozenset({"admin", "maintain", "write", "triage"})


class Comment(BaseModel):
    """A comment on an issue, reduced to what the bot needs."""

    id: int
    body: str
    author: str
    author_is_bot: bool = False
    author_association: str | None = None


class WebhookEvent(BaseModel):
    """One delivery about one issue, parsed out of GitHub's payload by `payloads.parse_event`."""

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
    # GitHub's word for the issue's author here (OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, ...).
    author_association: str | None = None
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
    author_association: str | None = None  # as the event's; None where the API does not say

    @classmethod
    def from_event(cls, event: WebhookEvent) -> IssueSnapshot:
        return cls(issue=event.issue, state=event.issue_state, is_pull_request=event.is_pull_request,
                   labels=event.issue_labels, author_association=event.author_association)


class PostedComment(BaseModel):
    """The bot's comment after an upsert: its id and whether GitHub saw a write."""

    id: int
    created: bool
    changed: bool
