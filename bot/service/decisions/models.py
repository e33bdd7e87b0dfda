"""The decision each triage job leaves, for audit, `/decisions` and the review page."""

from __future__ import annotations

from pydantic import BaseModel


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
    title: str = ""  # the title when it was triaged (the review page's queue)
    approved_by: str | None = None  # who posted this shadow decision's comment from the review page
