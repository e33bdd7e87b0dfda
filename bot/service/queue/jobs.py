"""Jobs: the unit of work the queue holds (the decision a triage job leaves: `bot/service/decisions/`)."""

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
