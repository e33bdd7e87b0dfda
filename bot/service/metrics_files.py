"""Where the processes of `serve` write their metrics, so that the web process exports every worker's.

prometheus_client reads `PROMETHEUS_MULTIPROC_DIR` once, when it is imported, to choose how every series of
the process stores its values: so this module imports nothing of it, and `serve` calls
`share_metrics_between_processes` before anything imports it. The worker processes inherit the variable.

In the shipped `compose.yaml` the web process and the workers are separate containers: the variable names a
directory on the volume they share, and each process names its files by host name and pid (every container's
first process is pid 1), so the web's `/metrics` adds up every worker's series.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

from bot.core.errors import ConfigError
from bot.core.settings import Settings

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def share_metrics_between_processes(settings: Settings) -> Path:
    """The multiprocess directory: the operator's `PROMETHEUS_MULTIPROC_DIR` as it is (worker containers may
    be writing there: a restarted web counts on from their files), else `STATE_DIR/metrics/<pid>`, one per
    `serve` (replicas may share a state directory), emptied (series of an earlier run would otherwise be
    added to this one's); the directories of `serve` processes that are gone are removed."""
    given = os.environ.get(MULTIPROC_VARIABLE)
    if given:
        path = Path(given)
    else:
        if "prometheus_client" in sys.modules:
            raise ConfigError("metrics: prometheus_client was imported before serve chose its multiprocess "
                              f"directory; set {MULTIPROC_VARIABLE} to an empty directory and start again")
        root = settings.state_dir / "metrics"
        for stale in root.glob("[0-9]*"):
            if not _alive(int(stale.name)):
                shutil.rmtree(stale, ignore_errors=True)
        path = root / str(os.getpid())
        path.mkdir(parents=True, exist_ok=True)
        for stale_file in path.glob("*.db"):
            stale_file.unlink()
        os.environ[MULTIPROC_VARIABLE] = str(path)
    join_shared_metrics()
    return path


def join_shared_metrics() -> None:
    """A worker process (`ddl-triage worker`, or one `serve` started): in multiprocess mode, its directory
    exists and its files are named by host and pid. Call before anything creates a series."""
    given = os.environ.get(MULTIPROC_VARIABLE)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        name_metrics_files()


def process_identifier(pid: int | None = None) -> str:
    """The name of a process's metrics files: containers sharing the directory all run as pid 1."""
    return f"{socket.gethostname()}-{os.getpid() if pid is None else pid}"


def name_metrics_files() -> None:
    from prometheus_client import values

    values.ValueClass = values.MultiProcessValue(process_identifier)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def forget_process(pid: int) -> None:
    """A worker process has exited: its live gauges stop counting (its counters stay in the totals)."""
    if os.environ.get(MULTIPROC_VARIABLE):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(process_identifier(pid))
