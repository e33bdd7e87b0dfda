"""What a handler is given: the process's state, the engine, GitHub as the delivery's installation."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from bot.models.engine import Engine
from bot.service.github.client import InstallationClient
from bot.service.state import ServiceState


@dataclass
class JobContext:
    """What a handler may use: the engine, the store, GitHub as this installation (None: no credentials)."""

    state: ServiceState
    engine: Engine
    client: InstallationClient | None
    delivery_id: str
    payload: dict[str, Any] | None = None  # the delivery's payload when it is at hand (the Action), else stored
    # When the job started: what it would store of a repository or issue erased since then is refused.
    started_at: float = field(default_factory=time.time)

    @property
    def shadow(self) -> bool:
        return self.state.shadow


def payload_of(ctx: JobContext) -> dict[str, Any]:
    """The delivery's full payload (the domain event keeps only what triage needs)."""
    if ctx.payload is not None:
        return ctx.payload
    data: dict[str, Any] = json.loads(ctx.state.store.delivery_payload(ctx.delivery_id))
    return data
