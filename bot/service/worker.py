"""The worker: takes due jobs from the store, runs them, and retries with backoff what may succeed later."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from bot.errors import TriageError
from bot.service.errors import PermanentGitHubError, RateLimited, TransientGitHubError
from bot.service.events import Job
from bot.service.jobs import execute_job
from bot.service.logs import bind_delivery
from bot.service.state import ServiceState

log = logging.getLogger(__name__)

Execute = Callable[[ServiceState, Job], str]


class Worker:
    """One thread; the engine is used by this thread alone, and one issue's jobs never run side by side."""

    def __init__(self, state: ServiceState, execute: Execute = execute_job) -> None:
        self.state = state
        self._execute = execute
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddl-triage-worker", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop after the current job; a job cut short stays 'running' and is queued again at start-up."""
        self._stop.set()
        self.state.wake_worker.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set() and not self.state.engine.ready.wait(0.1):
            pass
        next_sweep = 0.0
        while not self._stop.is_set():
            try:
                if self.state.store.postgres and time.monotonic() >= next_sweep:
                    self.state.store.requeue_running(self.state.settings.stale_job_s)
                    next_sweep = time.monotonic() + 60.0
                job = self.state.store.claim_job()
            except Exception:  # a database hiccup must not kill the worker
                log.exception("cannot claim a job")
                job = None
            if job is not None:
                self.process(job)
                continue
            self.state.wake_worker.wait(self.state.settings.worker_poll_s)
            self.state.wake_worker.clear()

    def process(self, job: Job) -> None:
        """Run one claimed job and record how it ended: done, queued again after a delay, or failed."""
        metrics, store = self.state.metrics, self.state.store
        with bind_delivery(job.delivery_id):
            started = time.perf_counter()
            try:
                outcome = self._execute(self.state, job)
            except RateLimited as exc:
                self._again(job, "rate_limited", str(exc), exc.retry_after)
            except TransientGitHubError as exc:
                self._again(job, "transient", str(exc), self.backoff(job.attempts))
            except (PermanentGitHubError, TriageError) as exc:
                self._give_up(job, "permanent", str(exc))
            except Exception as exc:  # a bug: logged with its traceback, retried like a transient error
                log.exception("job %s raised", job.id)
                self._again(job, "internal", f"{type(exc).__name__}: {exc}", self.backoff(job.attempts))
            else:
                store.finish_job(job.id)
                metrics.jobs.labels(outcome="done").inc()
                metrics.delivery_to_done_seconds.observe(max(0.0, time.time() - job.received_at))
                log.info("job done: %s", outcome, extra={"job": job.id, "event": f"{job.event}.{job.action}",
                                                          "attempt": job.attempts})
            finally:
                metrics.job_seconds.observe(time.perf_counter() - started)

    def backoff(self, attempts: int) -> float:
        """Exponential backoff with a little jitter, capped."""
        options = self.state.settings
        delay = min(options.retry_max_s, options.retry_base_s * 2 ** max(0, attempts - 1))
        return delay * random.uniform(1.0, 1.2)

    def _again(self, job: Job, reason: str, error: str, delay_s: float) -> None:
        self.state.metrics.failures.labels(reason=reason).inc()
        if job.attempts >= self.state.settings.max_attempts:
            self._give_up(job, reason, f"{error} (after {job.attempts} attempts)")
            return
        self.state.store.retry_job(job.id, error, delay_s)
        self.state.metrics.jobs.labels(outcome="retried").inc()
        log.warning("job %s attempt %d failed (%s); retrying in %.1fs", job.id, job.attempts, error, delay_s,
                    extra={"job": job.id, "reason": reason})

    def _give_up(self, job: Job, reason: str, error: str) -> None:
        if reason == "permanent":
            self.state.metrics.failures.labels(reason=reason).inc()
        self.state.store.fail_job(job.id, error)
        self.state.metrics.jobs.labels(outcome="failed").inc()
        log.error("job %s failed for good: %s", job.id, error, extra={"job": job.id, "reason": reason})
