"""What the lifespan owns, in one object the routes and the worker share; and the service's own knobs."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.engine import Engine, build_engine
from bot.errors import ConfigError
from bot.memory.queries import Memory
from bot.service.github.app import GitHubApp
from bot.service.github.credentials import AppCredentials, check_credentials
from bot.service.metrics import Metrics
from bot.service.queue.store import Store
from bot.service.web.intake import Intake
from bot.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceOptions:
    """How one app instance runs, beside the Settings; tests stop the worker to simulate a crash."""

    run_worker: bool = True
    shutdown_timeout_s: float = 10.0
    # After start-up, move what is alive into the collector's permanent generation (`gc.freeze`): a full
    # collection then skips the ~150k objects of the imported libraries, which stalled every request in
    # flight for ~100 ms under load. For the long-lived `serve` process; tests build many apps and keep it off.
    freeze_heap: bool = False


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


def connect_github(settings: Settings) -> GitHubApp | None:
    """The App client from the settings (None in shadow mode without credentials); checks them first."""
    credentials = check_credentials(settings)
    return _github_app(credentials, settings) if credentials else None


def _github_app(credentials: AppCredentials, settings: Settings) -> GitHubApp:
    return GitHubApp(credentials, write_interval_s=settings.write_interval_s)


def open_store(settings: Settings, busy_timeout_s: float = 30.0) -> Store:
    """The service database, or a ConfigError that names it and says what to check."""
    try:
        return Store(settings.sqlite_url, busy_timeout_s=busy_timeout_s)
    except sqlite3.Error as exc:
        raise ConfigError(f"DDL_TRIAGE_DATABASE_URL {settings.sqlite_url}: cannot open the database ({exc}); "
                          "check that the file and its directory exist and are writable") from None
