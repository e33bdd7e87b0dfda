"""`serve --workers N` keeps N worker processes: all started and ready before the web process listens (one that
cannot start stops `serve` with its error), and each that dies later started again, with backoff.

A worker reports over a pipe the supervisor gives it (`ddl-triage worker --report-fd`): one line `ready` once its
engine is loaded, or `error <message>` when its start-up fails. Without the pipe (`ddl-triage worker` run by an
operator or by compose) it reports nothing.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from bot.core.errors import ConfigError
from bot.service.metrics_files import forget_process

log = logging.getLogger(__name__)

READY, ERROR = "ready", "error"
BACKOFF_FIRST_S = 1.0  # the first restart of a worker that dies; doubled for each death in a row
BACKOFF_MAX_S = 60.0
STABLE_S = 60.0  # a worker that ran this long before dying starts again after BACKOFF_FIRST_S
POLL_S = 0.2


@dataclass
class Slot:
    """One of the N workers: its current process, its report pipe, and how often it died in a row."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    report: int | None = None  # the read end of its pipe
    started_at: float = 0.0
    deaths: int = 0
    restart_at: float | None = None
    restarts: int = 0
    last_exit: str | None = None
    said: list[str] = field(default_factory=list)  # what it reported so far


class Supervisor:
    """Starts, watches and stops the worker processes of one `serve`."""

    def __init__(self, count: int, env: dict[str, str], niceness: int) -> None:
        self.slots = [Slot(i) for i in range(count)]
        self._env = env
        self._niceness = niceness
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="ddl-triage-supervisor", daemon=True)

    def start(self) -> None:
        """Start every worker and wait until each is ready; a ConfigError with the first one's error (the others
        stopped) when one exits first. No deadline: a worker loads its engine in seconds, minutes when busy."""
        for slot in self.slots:
            self._spawn(slot)
        waiting = list(self.slots)
        while waiting:
            for slot in list(waiting):
                self._read(slot, timeout=POLL_S / len(waiting))
                if READY in slot.said:
                    waiting.remove(slot)
                    log.info("worker process %d ready", slot.process.pid if slot.process else -1)
                elif slot.process is not None and slot.process.poll() is not None:
                    self._read(slot, timeout=0.0)
                    error = self._startup_error(slot)
                    self.stop()
                    raise ConfigError(error)
        self._thread.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop restarting, then SIGTERM every worker (each finishes its job) and wait; SIGKILL after `timeout_s`."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            alive = [slot.process for slot in self.slots if slot.process is not None]
            for process in alive:
                if process.poll() is None:
                    process.terminate()
            for process in alive:
                try:
                    process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                forget_process(process.pid)
            for slot in self.slots:
                self._close_report(slot)

    def status(self) -> list[dict[str, object]]:
        """Each worker's pid, whether it is running, its restarts and how the last one ended (the ops details)."""
        with self._lock:
            return [{"pid": slot.process.pid if slot.process else None,
                     "running": slot.process is not None and slot.process.poll() is None,
                     "ready": READY in slot.said, "restarts": slot.restarts, "last_exit": slot.last_exit}
                    for slot in self.slots]

    def alive(self) -> int:
        with self._lock:
            return sum(1 for slot in self.slots if slot.process is not None and slot.process.poll() is None)

    # --- the watch thread ----------------------------------------------------------------------------------

    def _watch(self) -> None:
        """Every POLL_S: read what the workers said; a dead one is started again after its backoff."""
        while not self._stop.wait(POLL_S):
            with self._lock:
                for slot in self.slots:
                    try:
                        self._check(slot)
                    except Exception:  # one slot's trouble (a fork that fails) must not end the watch
                        log.exception("supervising worker %d failed; trying again", slot.index)

    def _check(self, slot: Slot) -> None:
        self._read(slot, timeout=0.0)
        process = slot.process
        if process is not None and process.poll() is not None:
            self._read(slot, timeout=0.0)
            ran_s = time.monotonic() - slot.started_at
            slot.deaths = 1 if ran_s >= STABLE_S else slot.deaths + 1
            delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (slot.deaths - 1))
            slot.last_exit = describe_exit(process.returncode)
            error = next((line for line in reversed(slot.said) if line.startswith(ERROR)), None)
            log.error("worker process %d %s after %.0f s%s; starting another in %.0f s", process.pid,
                      slot.last_exit, ran_s, f" ({error})" if error else "", delay,
                      extra={"worker": slot.index, "restarts": slot.restarts})
            forget_process(process.pid)
            self._close_report(slot)
            slot.process, slot.restart_at = None, time.monotonic() + delay
        if slot.process is None and slot.restart_at is not None and time.monotonic() >= slot.restart_at:
            slot.restarts += 1
            self._spawn(slot)
            log.warning("worker process %d started (restart %d of worker %d)",
                        slot.process.pid if slot.process else -1, slot.restarts, slot.index)

    # --- processes and their pipes -------------------------------------------------------------------------

    def _spawn(self, slot: Slot) -> None:
        read_end, write_end = os.pipe()
        command = [sys.executable, "-c", "from bot.cli.main import main; main()", "worker",
                   "--report-fd", str(write_end), "--parent", str(os.getpid()), "--nice", str(self._niceness)]
        try:
            slot.process = subprocess.Popen(command, env=self._env, pass_fds=(write_end,))
        finally:
            os.close(write_end)
        slot.report, slot.started_at, slot.restart_at, slot.said = read_end, time.monotonic(), None, []

    def _read(self, slot: Slot, timeout: float) -> None:
        """Whole lines the worker wrote so far (a worker writes each line in one call)."""
        if slot.report is None:
            return
        ready, _, _ = select.select([slot.report], [], [], timeout)
        if not ready:
            return
        data = os.read(slot.report, 65536)
        if not data:  # the worker closed its end (it exited)
            self._close_report(slot)
            return
        slot.said += [line for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()]

    def _close_report(self, slot: Slot) -> None:
        if slot.report is not None:
            os.close(slot.report)
            slot.report = None

    def _startup_error(self, slot: Slot) -> str:
        assert slot.process is not None
        reported = next((line.removeprefix(ERROR).strip() for line in slot.said if line.startswith(ERROR)), None)
        return (f"a worker process could not start ({describe_exit(slot.process.returncode)}): "
                f"{reported or 'see its log above'}")


def describe_exit(returncode: int | None) -> str:
    """'exited with status 1', 'killed by SIGKILL'."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"
