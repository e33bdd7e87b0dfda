"""What a process of the service holds, and the one way every process builds it (`build_state`): the web
process, the worker processes, the Action and the tests' in-process harness get the same store, memory,
corrections and settings, and an engine wherever handlers run."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial

from bot.comment.reading import reading_model
from bot.core.domain import Issue
from bot.core.errors import ConfigError
from bot.core.redaction import redact
from bot.core.settings import Settings
from bot.deciding.shadow import service_shadow
from bot.memory.queries import Memory
from bot.models.engine import Engine, build_engine
from bot.models.llm.base import ChatModel, make_chat_model
from bot.models.llm.local_transformers import resolve_local_model
from bot.service.github.credentials import check_credentials
from bot.service.github.github_app import GitHubApp
from bot.service.github.pacing import SharedPause, pace_write
from bot.service.handlers.feedback import LearnedCorrections
from bot.service.metrics import Metrics
from bot.service.queue.store import Store
from bot.service.web.intake import Intake

log = logging.getLogger(__name__)

INTAKE_CONNECTIONS = 1  # writer threads per web process on PostgreSQL (SQLite serialises writers: one)
WARM_UP = Issue(title="warm-up", body="loads the embedding model before this process says it is ready")
GitHubFactory = Callable[[Settings], GitHubApp | None]


class Role(StrEnum):
    """What a process does; `build_state` gives it what that takes."""

    WEB = "web"  # `serve`'s web process: verify, record, acknowledge (no engine: triage runs in the workers)
    WORKER = "worker"  # a worker process: runs the handlers, its engine loaded before it claims a job
    WEB_AND_WORKER = "web+worker"  # one process that does both (the tests' in-process harness)
    ACTION = "action"  # one workflow run: the handlers, as the workflow's token

    @property
    def takes_deliveries(self) -> bool:
        return self in (Role.WEB, Role.WEB_AND_WORKER)


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
    """The engine: ready at once when injected, else built (in the background, so intake starts at once)."""

    def __init__(self, engine: Engine | None = None) -> None:
        self.engine = engine
        self.error: str | None = None
        self.ready = threading.Event()
        if engine is not None:
            self.ready.set()

    def load_in_background(self, settings: Settings, on_ready: Callable[[Engine], object]) -> None:
        threading.Thread(target=self._load, args=(settings, on_ready), name="ddl-triage-engine",
                         daemon=True).start()

    def load(self, settings: Settings, on_ready: Callable[[Engine], object]) -> Engine:
        """Build the engine in this thread (a failure raises); `on_ready` runs before it counts as ready."""
        engine = build_engine(settings)
        on_ready(engine)
        self.engine = engine
        self.ready.set()
        log.info("case base loaded", extra={"cases": len(engine.index)})
        return engine

    def _load(self, settings: Settings, on_ready: Callable[[Engine], object]) -> None:
        try:
            self.load(settings, on_ready)
        except Exception as exc:  # the health check reports it; intake keeps storing deliveries
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("the engine could not be built")


@dataclass
class ServiceState:
    """The long-lived resources of one process (or one in-process app instance)."""

    settings: Settings
    options: ServiceOptions
    role: Role
    store: Store
    metrics: Metrics
    engine: EngineSlot
    github: GitHubApp | None
    memory: Memory  # the repository memory (its own tables in the same database)
    corrections: LearnedCorrections  # what the engine has learned of the maintainers' corrections
    # The webhook's writer (its own connections, group commit), so the ack never queues behind a worker's write.
    intake: Intake | None = None
    chat: ChatModel | None = None  # the LLM that writes the comment's reading, where one is configured
    wake_worker: threading.Event = field(default_factory=threading.Event)
    worker_alive: Callable[[], bool] = lambda: False
    # Under `serve`: the supervisor's view of its worker processes (pid, running, restarts, last exit).
    worker_processes: Callable[[], list[dict[str, object]]] | None = None

    def sqlite_pragma(self, statement: str) -> None:
        """`PRAGMA statement` on every connection this instance holds to its SQLite database (the worker's,
        the intake's, the memory's): SQLite keeps settings such as `max_page_count` per connection."""
        for store in [self.store, *(self.intake.stores if self.intake else [])]:
            store.pragma(statement)
        self.memory.store.pragma(statement)

    @property
    def shadow(self) -> bool:
        """Decisions are stored, not posted: asked for, or no App credentials to post with."""
        return service_shadow(self.settings, can_post=self.github is not None)

    def close(self) -> None:
        if self.intake is not None:
            self.intake.close()
        self.memory.close()
        self.store.close()


def build_state(settings: Settings, role: Role, *, engine: Engine | None = None,
                github: GitHubFactory | None = None, options: ServiceOptions | None = None) -> ServiceState:
    """Every process's state, built one way: the App client (paced through the shared database), the store,
    the repository memory, the metrics and the corrections; the intake where deliveries are taken; where
    handlers run, the engine (with every correction so far) and the LLM of the comment's reading (if one is
    configured). `engine` is injected by tests; otherwise a WORKER or the ACTION builds (and warms) it before
    this returns, WEB_AND_WORKER in the background, WEB never."""
    # A bad DDL_TRIAGE_LLM stops start-up here, in the web process too (which loads no model).
    check_reading_model(settings)
    chat = reading_model(settings) if role is not Role.WEB else None
    client = (github or connect_github)(settings)
    store = open_store(settings)
    if client is not None:
        client.pace_with(partial(pace_write, store))
        client.pause_with(partial(SharedPause, store))
    state = ServiceState(
        settings=settings, options=options or ServiceOptions(run_worker=role is Role.WEB_AND_WORKER), role=role,
        store=store, metrics=Metrics(), engine=EngineSlot(engine), github=client, memory=Memory.open(settings),
        corrections=LearnedCorrections(store, settings.github_api_url),
        intake=open_intake(settings, store) if role.takes_deliveries else None,
        chat=chat)
    if engine is not None:
        state.corrections.catch_up(engine)
    elif role is Role.WEB_AND_WORKER:
        state.engine.load_in_background(settings, on_ready=state.corrections.catch_up)
    elif role is not Role.WEB:
        state.engine.load(settings, on_ready=partial(_learn_and_warm_up, state.corrections))
    return state


def _learn_and_warm_up(corrections: LearnedCorrections, engine: Engine) -> None:
    corrections.catch_up(engine)
    engine.triage(WARM_UP)  # the embedding model loads now, not in the first job


def check_reading_model(settings: Settings) -> None:
    """What a worker's `reading_model` refuses, found without loading a model (the web process, `serve`'s
    parent before it starts the workers): an unknown backend, a missing key, a local model that is not there."""
    if not settings.llm:
        return
    prefix, _, rest = settings.llm.partition(":")
    if prefix == "local" and rest:
        resolve_local_model(rest)
    else:
        make_chat_model(settings.llm, settings)  # an OpenAI-compatible client: made, no request sent


def connect_github(settings: Settings) -> GitHubApp | None:
    """The App client from the settings (None in shadow mode without credentials); checks them first."""
    credentials = check_credentials(settings)
    return GitHubApp(credentials, write_interval_s=settings.write_interval_s) if credentials else None


def open_store(settings: Settings, busy_timeout_s: float = 30.0, urgent: bool = False) -> Store:
    """The service database, or a ConfigError that names it and says what to check."""
    try:
        return Store(settings.sqlite_url, busy_timeout_s=busy_timeout_s, urgent=urgent)
    except sqlite3.Error as exc:
        raise ConfigError(f"DDL_TRIAGE_DATABASE_URL {redact(settings.sqlite_url)}: cannot open the database ({exc}); "
                          "check that the file and its directory exist and are writable") from None


def open_intake(settings: Settings, store: Store) -> Intake:
    """The webhook's writer. Its connections wait for the database less than the ack's bound, so that a
    delivery refused with 503 was, as far as timing allows, not stored either (a redelivery is deduplicated)."""
    return Intake([open_store(settings, busy_timeout_s=settings.ack_timeout_s * 0.4, urgent=True)
                   for _ in range(INTAKE_CONNECTIONS if store.postgres else 1)],
                  timeout_s=settings.ack_timeout_s, max_pending=settings.max_pending_deliveries)
