"""What the lifespan owns, in one object the routes and the worker share; and the service's own knobs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from bot.engine import Engine, build_engine
from bot.memory.service import Memory
from bot.service.github import GitHubApp
from bot.service.intake import Intake
from bot.service.metrics import Metrics
from bot.service.store import Store
from bot.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceOptions:
    """How one app instance runs, beside the Settings; tests stop the worker to simulate a crash."""

    run_worker: bool = True
    shutdown_timeout_s: float = 10.0


class EngineSlot:
    """The engine, ready at once when injected, else built in the background so intake starts at once."""

    def __init__(self, engine: Engine | None = None) -> None:
        self.engine = engine
        self.error: str | None = None
        self.ready = threading.Event()
        if engine is not None:
            self.ready.set()

    def load_in_background(self, settings: Settings, on_ready: Callable[[Engine], object]) -> None:
        threading.Thread(target=self._load, args=(settings, on_ready), name="ddl-triage-engine",
                         daemon=True).start()

    def _load(self, settings: Settings, on_ready: Callable[[Engine], object]) -> None:
        try:
            self.engine = build_engine(settings)
            on_ready(self.engine)
            log.info("case base loaded", extra={"cases": len(self.engine.index)})
            self.ready.set()
        except Exception as exc:  # the health check reports it; intake keeps storing deliveries
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("the engine could not be built")


@dataclass
class ServiceState:
    """The long-lived resources of one app instance."""

    settings: Settings
    options: ServiceOptions
    store: Store
    metrics: Metrics
    engine: EngineSlot
    github: GitHubApp | None
    wake_worker: threading.Event = field(default_factory=threading.Event)
    worker_alive: Callable[[], bool] = lambda: False
    # The webhook's writer (its own connections, group commit), so the ack never queues behind a worker's write.
    intake: Intake | None = None
    memory: Memory | None = None  # the repository memory (its own tables in the same database)

    def sqlite_pragma(self, statement: str) -> None:
        """`PRAGMA statement` on every connection this instance holds to its SQLite database (the worker's,
        the intake's, the memory's): SQLite keeps settings such as `max_page_count` per connection."""
        intake = self.intake.stores if self.intake else []
        for store in [self.store, *intake, self.memory.store if self.memory else None]:
            if store is not None:
                store.pragma(statement)

    @property
    def shadow(self) -> bool:
        """Decisions are stored, not posted: asked for, or no App credentials to post with."""
        return self.settings.shadow or self.github is None


async def _state(request: Request) -> ServiceState:
    # async on purpose: FastAPI runs a plain-def dependency in its thread pool, a thread hop per request.
    state: ServiceState = request.app.state.service
    return state


StateDep = Annotated[ServiceState, Depends(_state)]
