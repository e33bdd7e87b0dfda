"""Progress of a run on stderr: rich bars on a terminal, one plain line per finished step otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class Reporter:
    """Counts fit-and-predict steps of a run and relays the engine's (task, advance, total) callback."""

    def __init__(self, total_steps: int, enabled: bool = True) -> None:
        self.console = Console(stderr=True)
        self.live = enabled and self.console.is_terminal
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=self.console, transient=True, disable=not self.live)
        self._steps: TaskID = self._bar.add_task("benchmark", total=total_steps)
        self._inner: TaskID = self._bar.add_task("", total=None, visible=False)
        self._done, self._total, self._label, self._started = 0, total_steps, "", time.monotonic()
        self._quiet, self._inner_name = not enabled, ""

    def __enter__(self) -> Reporter:
        self._bar.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._bar.__exit__(kind, error, trace)

    def begin(self, label: str) -> None:
        """A fit-and-predict step starts (e.g. `ddl-dev.jsonl linear fold 2/5`)."""
        self._label, self._started, self._inner_name = label, time.monotonic(), ""
        self._bar.update(self._steps, description=label)

    def engine(self, task: str, advance: int, total: int) -> None:
        """The engine's progress callback: shown as the second bar."""
        if task != self._inner_name:
            self._inner_name = task
            self._bar.reset(self._inner, total=total, description=f"  {task}", visible=True)
        self._bar.update(self._inner, advance=advance, total=total)

    def end(self) -> None:
        self._done += 1
        self._bar.update(self._steps, advance=1)
        if not self.live and not self._quiet:
            print(f"[{self._done}/{self._total}] {self._label}: {time.monotonic() - self._started:.1f} s",
                  file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        """A line the user must see (what was skipped), printed above the bars."""
        if self.live:
            self._bar.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=sys.stderr, flush=True)
