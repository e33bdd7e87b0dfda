"""Progress of a run on stderr: rich bars on a terminal, one plain line per finished job otherwise."""

from __future__ import annotations

import sys
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class Reporter:
    """Counts the fit-and-predict jobs of a run and relays the engine's (task, advance, total) callback."""

    def __init__(self, total_jobs: int, enabled: bool = True) -> None:
        self.console = Console(stderr=True)
        self.live = enabled and self.console.is_terminal
        self._quiet = not enabled
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=self.console, transient=True, disable=not self.live)
        self._jobs: TaskID = self._bar.add_task("benchmark", total=total_jobs)
        self._inner: TaskID = self._bar.add_task("", total=None, visible=False)
        self._done, self._total, self._inner_name = 0, total_jobs, ""

    def __enter__(self) -> Reporter:
        self._bar.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._bar.__exit__(kind, error, trace)

    def status(self, text: str) -> None:
        """What the run is doing now (loading, embedding, which jobs are running)."""
        self._bar.update(self._jobs, description=text)
        self._inner_name = ""
        self._bar.update(self._inner, visible=False)

    def engine(self, task: str, advance: int, total: int) -> None:
        """The engine's progress callback (inline jobs only), shown as a second bar."""
        if task != self._inner_name:
            self._inner_name = task
            self._bar.reset(self._inner, total=total, description=f"  {task}", visible=True)
        self._bar.update(self._inner, advance=advance, total=total)

    def finished(self, label: str, seconds: float) -> None:
        self._done += 1
        self._bar.update(self._jobs, advance=1)
        if not self.live and not self._quiet:
            print(f"[{self._done}/{self._total}] {label}: {seconds:.1f} s", file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        """A line the user must see (what was skipped), printed above the bars."""
        if self.live:
            self._bar.console.print(message, markup=False, highlight=False)
        elif not self._quiet or message.startswith("eval: warning"):
            print(message, file=sys.stderr, flush=True)
