"""Log lines as the frameworks print them: the prefixes that launchers, loggers and schedulers put in front of
every line (rank, host, timestamp, log level), taken off so the line underneath can be read, with the rank kept.

Every pattern here is anchored and free of nested quantifiers: these run on hostile pastes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Prefixes that carry a rank: `[rank3]:` (torchrun), `[default3]:` (torchrun --tee), `[1,3]<stderr>:` (mpirun),
# `3: ` (srun -l).
RANK_PREFIXES = (
    re.compile(r"\[(?:rank|default)(\d{1,6})\]:[ \t]?", re.IGNORECASE),
    re.compile(r"\[\d{1,6},(\d{1,6})\]<std(?:out|err)>:[ \t]?"),
    re.compile(r"(\d{1,6}): "),
)
HOST_PREFIX = re.compile(r"[\w.-]{0,60}\d[\w.-]{0,60}: (?=\S)")  # pdsh's `worker-1: `: a host name with a digit
# Prefixes that carry nothing we keep.
PLAIN_PREFIXES = (
    re.compile(r">[ \t]?"),  # a markdown quote
    re.compile(r"\[?\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?[ \t,:-]*"),
    # glog and torch's C++ logger: `E0301 10:11:12.123456 1234 ProcessGroupNCCL.cpp:475] `, `[E Work.cpp:475] `
    re.compile(r"\[?[IWEF]\d{0,4}(?: \d\d:\d\d:\d\d\.\d{1,9})?(?: \d{1,9})? [\w.-]{1,80}:\d{1,6}\][ \t]*"),
    re.compile(r"\[(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\][ \t]*"),
    re.compile(r"\[[\w.-]{1,80}:\d{1,6}:\w{1,80}\][ \t]*"),  # DeepSpeed's `[launch.py:321:sigkill_handler] `
    re.compile(r"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):[\w.]{1,120}:"),  # Python logging's default format
    HOST_PREFIX,
)
MAX_PREFIXES = 6


@dataclass(frozen=True)
class LogLine:
    """One line with its prefixes taken off; `stream` tells apart interleaved processes (host and rank)."""

    text: str
    rank: int | None
    stream: str

    @property
    def indent(self) -> int:
        return len(self.text) - len(self.text.lstrip())


def read_line(raw: str) -> LogLine:
    """Take the launcher, logger and scheduler prefixes off one line, keeping the indentation underneath."""
    line = ANSI.sub("", raw).rstrip()
    rank: int | None = None
    stream: list[str] = []
    taken = False
    for _ in range(MAX_PREFIXES):
        # Leading blanks before the first prefix are markdown's; after a prefix they are the traceback's own.
        candidate = line if taken else line.lstrip()
        match, keeps_rank, names_stream = _prefix(candidate)
        if match is None:
            break
        if keeps_rank and rank is None:
            rank = int(match.group(1))
        if names_stream:
            stream.append(match.group(0).strip())
        line, taken = candidate[match.end():], True
    return LogLine(text=line, rank=rank, stream=" ".join(stream))


def _prefix(line: str) -> tuple[re.Match[str] | None, bool, bool]:
    """The first prefix at the start of `line`: (match, whether it carries a rank, whether it names a stream)."""
    for pattern in RANK_PREFIXES:
        if match := pattern.match(line):
            return match, True, True
    for pattern in PLAIN_PREFIXES:
        match = pattern.match(line)
        if match and match.end() > 0 and not _looks_like_exception_name(match.group(0)):
            return match, False, pattern is HOST_PREFIX
    return None, False, False


def _looks_like_exception_name(prefix: str) -> bool:
    """`Error1: ...` is rare but `RuntimeError: ` must never be taken for a host name."""
    return prefix.rstrip(": ").endswith(("Error", "Exception"))
