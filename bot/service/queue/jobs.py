"""Jobs: the unit of work the queue holds, and the decision each triage job leaves for audit and `/decisions`."""

from __future__ import annotations

from pydantic import BaseModel


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
    write_slot: float | None = None  # a write to its installation booked at this time by an earlier run


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
    comment: str | None = None  # the markdown posted (or, in shadow mode, that would be); None: silent
    outcome: str = ""  # what the job did: "comment created", "silent: nothing to add", ...
    reasons: list[str] = []  # the comment's reasons to speak (bot/comment/policy.py REASONS), posted or not
    created_at: float = 0.0
    title: str = ""  # the issue's title when it was triaged (the review page's queue)
    approved_by: str | None = None  # who posted this shadow decision's comment from the review page
