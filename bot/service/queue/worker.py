"""The worker: claims due jobs under a lease, runs them, and retries with backoff what may succeed later."""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bot.core.errors import TriageError
from bot.core.storage.database import StoreUnavailable, unavailable
from bot.service.errors import PermanentGitHubError, RateLimited, RetryLater, TransientGitHubError, WriteDeferred
from bot.service.github.pacing import holding_write_slot
from bot.service.handlers.dispatch import execute_job
from bot.service.logs import bind_delivery
from bot.service.queue.jobs import Job
from bot.service.queue.recovery import recover_missed
from bot.service.queue.upkeep import worker_beat
from bot.service.retention.policy import prune
from bot.service.review.reactions import read_reactions
from bot.service.state import ServiceState

log = logging.getLogger(__name__)

Execute = Callable[[ServiceState, Job], str]
# Inputs that no retry can change (a lone surrogate, a number too large for the API): failed at once.
HOPELESS = (UnicodeError, OverflowError, RecursionError)
MAX_LOOP_PAUSE_S = 30.0
PRUNE_EVERY_S = 3600.0
RECOVER_EVERY_S = 600.0  # missed deliveries: at start-up, then every ten minutes
REACTIONS_EVERY_S = 300.0  # reactions on the bot's comments (bounded per hour: `review/reactions.py`)


class Worker:
    """One thread; the engine is used by this thread alone, and one issue's jobs never run side by side."""

    def __init__(self, state: ServiceState, execute: Execute = execute_job) -> None:
        self.state = state
        self._execute = execute
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, name="ddl-triage-worker", daemon=True)
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        self._stop.set()
        self.state.wake_worker.set()

    def stop(self, timeout: float) -> None:
        """Stop after the current job; a job cut short keeps its lease, which runs out and requeues it."""
        self.request_stop()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def run(self) -> None:
        """The loop: nothing a job or the database raises ends it (it pauses, longer while errors repeat)."""
        while not self._stop.is_set() and not self.state.engine.ready.wait(0.1):
            pass
        next_sweep, next_prune, next_recovery, next_reactions, errors = 0.0, 0.0, 0.0, 0.0, 0
        while not self._stop.is_set():
            try:
                if time.monotonic() >= next_sweep:
                    requeued = self.state.store.requeue_running()
                    if requeued:
                        log.warning("%d job(s) whose worker's lease ran out are queued again", requeued)
                    worker_beat(self.state.store, self.worker_id, self.state.engine.engine is not None)
                    next_sweep = time.monotonic() + self.state.settings.job_lease_s / 3
                if time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + PRUNE_EVERY_S
                    gone = prune(self.state.store, self.state.settings.retention_days,
                                 feedback_days=self.state.settings.feedback_retention_days)
                    if any(gone.values()):
                        log.info("retention: deleted %s", gone)
                # Not in shadow mode: asking GitHub to redeliver is an action on the App's behalf.
                if self.state.github is not None and not self.state.shadow and time.monotonic() >= next_recovery:
                    next_recovery = time.monotonic() + RECOVER_EVERY_S
                    self._recover()
                if self.state.github is not None and time.monotonic() >= next_reactions:
                    next_reactions = time.monotonic() + REACTIONS_EVERY_S
                    self._reactions()
                job = self.state.store.claim_job(lease_s=self.state.settings.job_lease_s)
                if job is not None:
                    self.process(job)
                errors = 0
            except Exception:  # a database restart, a full disk, a bug: log, pause, carry on
                errors += 1
                pause = min(MAX_LOOP_PAUSE_S, self.state.settings.worker_poll_s * 2 ** min(errors, 10))
                log.exception("the worker loop failed (%d in a row); pausing %.1fs", errors, pause)
                self._stop.wait(pause)
                continue
            if job is None:
                self.state.wake_worker.wait(self.state.settings.worker_poll_s)
                self.state.wake_worker.clear()

    def _recover(self) -> None:
        """Ask GitHub to redeliver what failed while we were down; a failure here only waits for next time."""
        assert self.state.github is not None
        try:
            asked = recover_missed(self.state.github, self.state.store)
        except Exception as exc:
            log.warning("missed-delivery recovery failed: %s", exc)
            return
        if asked:
            log.warning("asked GitHub to redeliver %d missed delivery(ies)", asked)

    def _reactions(self) -> None:
        """Read reactions on the bot's comments as feedback; a failure here only waits for the next round."""
        try:
            read = read_reactions(self.state)
        except Exception as exc:
            log.warning("reading reactions failed: %s", exc)
            return
        if read:
            log.info("reactions read on %d comment(s)", read)

    def process(self, job: Job) -> None:
        """Run one claimed job and record how it ended: done, queued again after a delay, or failed.

        An outcome write that fails propagates to the loop; the job keeps its lease until that runs out,
        then is queued again (the comment is found again by its marker, so a repeat posts nothing new).
        """
        with bind_delivery(job.delivery_id):
            try:
                self._process(job)
            except Exception:
                log.exception("job %s: its outcome could not be recorded; it is retried once its lease runs out",
                              job.id, extra={"job": job.id})
                raise

    def _process(self, job: Job) -> None:
        metrics, store = self.state.metrics, self.state.store
        if job.attempts > self.state.settings.max_attempts:  # it was claimed, then its worker died, N times
            self._give_up(job, "internal", f"interrupted {job.attempts - 1} times; given up")
            return
        started = time.perf_counter()
        try:
            with self._heartbeat(job), holding_write_slot(job.write_slot):
                outcome = self._execute(self.state, job)
        except WriteDeferred as exc:  # its installation's next write slot is booked for it: run it again then
            self._defer(job, exc)
        except RateLimited as exc:  # GitHub said when: wait that long, and the attempt is not spent
            self._again(job, "rate_limited", str(exc), max(1.0, exc.retry_after), spend=False)
        except RetryLater as exc:  # the job's own schedule (a failed repository's sync backoff): not an attempt
            self._again(job, "retry_later", str(exc), max(1.0, exc.retry_after), spend=False)
        except TransientGitHubError as exc:
            self._again(job, "transient", str(exc), self.backoff(job.attempts))
        except StoreUnavailable as exc:  # before TriageError, which it is: the database, not the job
            self._database_down(job, exc)
        except (PermanentGitHubError, TriageError) as exc:
            self._give_up(job, "permanent", str(exc))
        except HOPELESS as exc:
            self._give_up(job, "permanent", f"{type(exc).__name__}: {exc}"[:500])
        except Exception as exc:
            if unavailable(exc):
                self._database_down(job, exc)
                return
            log.exception("job %s raised", job.id)  # a bug: logged with its traceback, retried like a transient
            self._again(job, "internal", f"{type(exc).__name__}: {exc}", self.backoff(job.attempts))
        else:
            if store.finish_job(job.id, job.lease_token):
                metrics.jobs.labels(outcome="done").inc()
                metrics.delivery_to_done_seconds.observe(max(0.0, time.time() - job.received_at))
                log.info("job done: %s", outcome, extra={"job": job.id, "event": f"{job.event}.{job.action}",
                                                          "attempt": job.attempts})
            else:
                self._lost(job)
        finally:
            metrics.job_seconds.observe(time.perf_counter() - started)

    @contextmanager
    def _heartbeat(self, job: Job) -> Iterator[None]:
        """Renew the job's lease every third of it while the job runs."""
        done = threading.Event()
        lease_s = self.state.settings.job_lease_s

        def beat() -> None:
            while not done.wait(lease_s / 3):
                try:
                    if not self.state.store.heartbeat(job.id, job.lease_token or "", lease_s):
                        log.warning("job %s: lease lost to another worker", job.id)
                        return
                except Exception:  # the next beat may succeed; the lease has slack for two misses
                    log.warning("job %s: heartbeat failed", job.id, exc_info=True)

        thread = threading.Thread(target=beat, name=f"ddl-triage-lease-{job.id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def backoff(self, attempts: int) -> float:
        """Exponential backoff with jitter (half to all of base * 2**(attempts-1), capped)."""
        options = self.state.settings
        delay = min(options.retry_max_s, options.retry_base_s * 2 ** max(0, attempts - 1))
        return delay * random.uniform(0.5, 1.0)

    def _again(self, job: Job, reason: str, error: str, delay_s: float, spend: bool = True) -> None:
        self.state.metrics.failures.labels(reason=reason).inc()
        if spend and job.attempts >= self.state.settings.max_attempts:
            self._give_up(job, reason, f"{error} (after {job.attempts} attempts)")
            return
        if not self.state.store.retry_job(job.id, job.lease_token, error, delay_s, spend_attempt=spend):
            self._lost(job)
            return
        self.state.metrics.jobs.labels(outcome="retried").inc()
        log.warning("job %s attempt %d failed (%s); retrying in %.1fs", job.id, job.attempts, error, delay_s,
                    extra={"job": job.id, "reason": reason})

    def _defer(self, job: Job, exc: WriteDeferred) -> None:
        """Queue the job again at its booked write slot (not an attempt; the worker goes on to other jobs)."""
        delay_s = max(0.0, exc.slot - time.time())
        if not self.state.store.retry_job(job.id, job.lease_token, str(exc), delay_s, spend_attempt=False,
                                          write_slot=exc.slot):
            self._lost(job)
            return
        self.state.metrics.jobs.labels(outcome="deferred").inc()
        log.info("job %s: %s; runs again in %.1fs", job.id, exc, delay_s, extra={"job": job.id})

    def _database_down(self, job: Job, exc: Exception) -> None:
        """The database is locked, full or restarting: not the job's fault, so its attempt is given back
        (a disk full for an hour loses nothing); the record of that may fail too, then the lease runs out."""
        self._again(job, "database", f"{type(exc).__name__}: {exc}", self.backoff(job.attempts), spend=False)

    def _give_up(self, job: Job, reason: str, error: str) -> None:
        if reason == "permanent":
            self.state.metrics.failures.labels(reason=reason).inc()
        if not self.state.store.fail_job(job.id, job.lease_token, error):
            self._lost(job)
            return
        self.state.metrics.jobs.labels(outcome="failed").inc()
        log.error("job %s failed for good: %s", job.id, error, extra={"job": job.id, "reason": reason})

    def _lost(self, job: Job) -> None:
        self.state.metrics.jobs.labels(outcome="lease_lost").inc()
        log.warning("job %s: its lease was taken over; the other worker records the outcome", job.id,
                    extra={"job": job.id})
