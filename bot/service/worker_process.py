"""`ddl-triage worker`: a process that loads the engine and runs jobs from the shared database until stopped."""

from __future__ import annotations

import logging
import signal
from types import FrameType

from bot.domain import Issue
from bot.engine import build_engine
from bot.service.app import connect_github, open_store
from bot.service.feedback import learn_corrections
from bot.service.logs import configure_logging
from bot.service.metrics import Metrics
from bot.service.state import EngineSlot, ServiceOptions, ServiceState
from bot.service.upkeep import reserve_write
from bot.service.worker import Worker
from bot.settings import Settings

log = logging.getLogger(__name__)


def run_worker_process(settings: Settings) -> None:
    """Run one worker in this process's main thread; SIGTERM or SIGINT stops it after the current job."""
    configure_logging()
    github = connect_github(settings)
    store = open_store(settings)
    try:
        if github is not None:
            github.pace_with(lambda installation, interval: reserve_write(store, installation, interval))
        engine = build_engine(settings)
        learn_corrections(engine, store, settings.github_api_url)
        engine.triage(Issue(title="warm-up", body="loads the embedding model before this worker says it is ready"))
        state = ServiceState(settings=settings, options=ServiceOptions(), store=store, metrics=Metrics(),
                             engine=EngineSlot(engine), github=github)
        worker = Worker(state)

        def stop(signum: int, frame: FrameType | None) -> None:
            log.info("worker stopping (signal %d)", signum)
            worker.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        log.info("ddl-triage worker started", extra={"shadow": state.shadow, "cases": len(engine.index)})
        worker.run()
    finally:
        store.close()
