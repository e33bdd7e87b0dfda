"""What a handler is given: the process's state, the engine, GitHub as the delivery's installation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bot.engine import Engine
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

    @property
    def shadow(self) -> bool:
        return self.state.shadow


def payload_of(ctx: JobContext) -> dict[str, Any]:
    """The delivery's full payload (the domain event keeps only what triage needs)."""
    if ctx.payload is not None:
        return ctx.payload
    data: dict[str, Any] = json.loads(ctx.state.store.delivery_payload(ctx.delivery_id))
    return data
