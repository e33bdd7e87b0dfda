"""How the process ended, from the lines launchers and shells print: exit codes, signals and the failing rank.

Read from `torch.distributed.elastic` summaries (`ChildFailedError` with its Root Cause block, `failed (exitcode:
-9) local_rank: 0`), DeepSpeed's launcher (`exits with return code = -9`), srun (`task 3: Killed`), Python's
`died with <Signals.SIGKILL: 9>`, shells (`Segmentation fault (core dumped)`, `Killed`) and native crash handlers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_EVENTS = 100
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}
# What a shell prints for a child killed by a signal.
SHELL_SIGNALS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
                 "Illegal instruction": "SIGILL", "Floating point exception": "SIGFPE"}
_SHELL_NAMES = "Segmentation fault|Aborted|Bus error|Illegal instruction|Floating point exception"
# `Segmentation fault` anywhere; the others only in the shapes a shell or Python prints them (`Aborted` is also prose).
SHELL_SIGNAL = re.compile(rf"\b(Segmentation fault)\b|\b({_SHELL_NAMES}) ?\(core dumped\)|"
                          rf"Fatal Python error: ({_SHELL_NAMES})|^({_SHELL_NAMES})$|"
                          rf"\d[ \t]{{1,8}}({_SHELL_NAMES})[ \t]")
# bash's `Killed` and `line 1:  4242 Killed  python ...`; the kernel's `Out of memory: Killed process 4242`
KILLED = re.compile(r"(?:^|\d[ \t]{1,8}|: )Killed\b")
SIGNAL_NAMED = re.compile(r"\b(?:Signal|signal) (\d{1,2}) \((SIG[A-Z]{2,6})\)|received signal (SIG[A-Z]{2,6})|"
                          r"\*\*\* (SIG[A-Z]{2,6}) |Caught signal (\d{1,2})|died with <Signals\.(SIG[A-Z]{2,6}): \d+>")
ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\)")
SUMMARY_RANK = re.compile(r"rank\s*:\s*(\d{1,6})")
SUMMARY_EXIT = re.compile(r"exitcode\s*:\s*(-?\d{1,4})")
ELASTIC_FAILED = re.compile(r"failed \(exitcode: (-?\d{1,4})\) local_rank: (\d{1,6})")
LAUNCHER_EXIT = re.compile(r"exits with return code = (-?\d{1,4})")
LAUNCHER_RANK = re.compile(r"--local_rank=(\d{1,6})")
SRUN_TASK = re.compile(r"srun: error: [^:]{0,200}: tasks? (\d{1,6})(?:-\d{1,6})?: (Killed|Segmentation fault|Aborted|"
                       r"Exited with exit code (\d{1,3}))")
WATCHDOG_RANK = re.compile(r"\[(?:PG \S{1,40} )?Rank (\d{1,6})\] (?:Watchdog|Process group watchdog)")
WORTH_READING = re.compile(r"exit|return code|srun|[Ss]ignal|SIG|Segmentation|Aborted|Bus error|Illegal instr|"
                           r"Floating point|Killed|Root Cause|rank|died with|Watchdog")
SENDING_SIGTERM = re.compile(r"[Ss]ending process \d+ closing signal SIGTERM")


@dataclass(frozen=True)
class ExitInfo:
    exit_code: int | None = None
    signal: str | None = None
    rank: int | None = None
    watchdog_rank: int | None = None


@dataclass
class ExitReader:
    """Fed line by line; the first failure a launcher names wins, the Root Cause block over everything."""

    codes: list[tuple[int, int | None]] = field(default_factory=list)  # (exit code, rank)
    signals: list[str] = field(default_factory=list)
    root_code: int | None = None
    root_rank: int | None = None
    in_root_cause: bool = False
    watchdog_rank: int | None = None

    def feed(self, line: str, rank: int | None) -> None:
        # SIGTERM sent by the launcher stops the healthy ranks: it is not the failure
        if len(self.codes) > MAX_EVENTS or len(self.signals) > MAX_EVENTS:
            return  # the first failures are the ones that matter; a paste of thousands adds nothing
        if not WORTH_READING.search(line) or SENDING_SIGTERM.search(line):
            return
        if ROOT_CAUSE.search(line):
            self.in_root_cause = True
            return
        self._summary(line)
        if (match := ELASTIC_FAILED.search(line)) is not None:
            self.codes.append((int(match.group(1)), int(match.group(2))))
        elif (match := LAUNCHER_EXIT.search(line)) is not None:
            local = LAUNCHER_RANK.search(line)
            self.codes.append((int(match.group(1)), int(local.group(1)) if local else rank))
        elif (match := SRUN_TASK.search(line)) is not None:
            self._srun(match)
        self._signals(line)
        if self.watchdog_rank is None and (match := WATCHDOG_RANK.search(line)) is not None:
            self.watchdog_rank = int(match.group(1))

    def _summary(self, line: str) -> None:
        """The `rank : 3 (local_rank: 3)` / `exitcode : -9 (pid: 4242)` rows of a ChildFailedError summary."""
        if (match := SUMMARY_RANK.match(line)) is not None:
            if self.in_root_cause and self.root_rank is None:
                self.root_rank = int(match.group(1))
        elif (match := SUMMARY_EXIT.match(line)) is not None:
            code = int(match.group(1))
            if self.in_root_cause and self.root_code is None:
                self.root_code = code
            else:
                self.codes.append((code, None))

    def _srun(self, match: re.Match[str]) -> None:
        task = int(match.group(1))
        if match.group(3) is not None:
            self.codes.append((int(match.group(3)), task))
        else:
            self.signals.append("SIGKILL" if match.group(2) == "Killed" else SHELL_SIGNALS[match.group(2)])
            self.codes.append((0, task))

    def _signals(self, line: str) -> None:
        if (match := SIGNAL_NAMED.search(line)) is not None:
            number = match.group(1) or match.group(5)
            name = match.group(2) or match.group(3) or match.group(4) or match.group(6)
            self.signals.append(name or SIGNALS.get(int(number or 0), f"signal {number}"))
        elif (match := SHELL_SIGNAL.search(line)) is not None:
            self.signals.append(SHELL_SIGNALS[next(g for g in match.groups() if g)])
        elif KILLED.search(line):
            self.signals.append("SIGKILL")

    def result(self) -> ExitInfo:
        failed = [(code, rank) for code, rank in self.codes if code != 0]
        code = self.root_code if self.root_code is not None else (failed[0][0] if failed else None)
        rank = self.root_rank if self.root_rank is not None else next(
            (r for _, r in self.codes if r is not None), None)
        return ExitInfo(exit_code=code, signal=self._signal(code), rank=rank, watchdog_rank=self.watchdog_rank)

    def _signal(self, code: int | None) -> str | None:
        """A signal the text names (SIGTERM only when nothing else), else the one an exit code stands for."""
        named = [s for s in self.signals if s != "SIGTERM"] or self.signals
        if named:
            return named[0]
        if code is not None and code < 0:
            return SIGNALS.get(-code, f"signal {-code}")
        if code is not None and 128 < code < 160 and code - 128 in SIGNALS:
            return SIGNALS[code - 128]  # a shell's 128 + N
        return None
