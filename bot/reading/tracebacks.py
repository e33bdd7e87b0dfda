"""The structure of a failure as a report shows it: the traceback's frames (each with the module guessed from its
path and the framework that owns it), the final exception and its message, the chain of exceptions before it, and
the process's exit code, signal and failing rank from launcher and scheduler lines.

Shapes read: Python tracebacks (with rank, host and timestamp prefixes, several ranks interleaved, chained
exceptions), exception lines quoted in prose, C++ `terminate called after throwing an instance of ...` with its
`what():` and `frame #N:` lines, and the exit lines of the launchers (`bot/reading/exits.py`). Library error lines
(NCCL, CUDA, compilers) are kept for `bot/reading/signatures.py`. Bounded work on any input: a long paste is cut to its
head and tail, long lines to their head, and every pattern is linear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from bot.reading.exits import ExitReader
from bot.reading.frames import Frame, cpp_frame, python_frame
from bot.reading.log_lines import LogLine, read_line

MAX_TEXT_CHARS = 200_000
MAX_LINE_CHARS = 2_000
MAX_ERROR_LINES = 200
MAX_FRAMES = 200
MAX_RAISED = 50  # the newest are kept: the failure is the last exception shown
MAX_STREAMS = 64  # interleaved processes told apart; any beyond share one stream

TRACEBACK_START = re.compile(r"Traceback \(most recent call last\):")
# The last line of a traceback: a dotted class name (or C++ `c10::Error`), optionally `: message`.
EXCEPTION_LINE = re.compile(r"([A-Za-z_][\w.]{0,200}(?:::\w{1,100}){0,4})(?::[ \t]*(.*))?")
# An exception quoted anywhere in a line: `... got the error: AssertionError: num_heads must ...`.
QUOTED_EXCEPTION = re.compile(
    r"(?<![A-Za-z0-9_.:])((?:[A-Za-z_][A-Za-z0-9_]{0,100}\.){0,10}[A-Za-z_][A-Za-z0-9_]{0,100}?"
    r"(?:Error|Exception|Interrupt|Failure))(?![A-Za-z0-9_])(?::[ \t]*(.*)|[`'\"]?[ \t]*$)")
CLOSING_QUOTES = {"`": "`", '"': '"', "“": "”", "'": "'"}
TOO_GENERIC_NAMES = frozenset({"Error", "Exception", "Failure", "error", "exception"})
CHAINED = re.compile(r"(?:During handling of the above exception|The above exception was the direct cause)")
TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']{1,200})'")
WHAT = re.compile(r"\s*what\(\):\s*(.*)")
ASSERT_STATEMENT = re.compile(r"\s*assert\b\s*(.{1,300})")
# Error lines of libraries, compilers and launchers that later become signatures (a cheap prefilter).
ERROR_LINE = re.compile(
    r"NCCL|nccl[A-Z]|CUDA|cuda (?:runtime )?error|CUBLAS|CUDNN|cuDNN|CUSOLVER|cudaError|nvcc|ninja|error:|fatal|"
    r"undefined symbol|Symbol not found|No module named|cannot import name|shared object file|kernel image|"
    r"terminate called|Watchdog|Error building extension|Failed building wheel|Assertion `|non-zero exit status")
# Every line that can matter contains one of these; a line outside a traceback without any is skipped unread.
WORTH_READING = re.compile(
    r"Error|Exception|Interrupt|Failure|Traceback|File \"|terminate called|NCCL|nccl|CUDA|cuda|CUBLAS|CUDNN|cuDNN|"
    r"CUSOLVER|nvcc|ninja|error:|fatal|[Ss]ymbol|No module named|cannot import|shared object|kernel image|Watchdog|"
    r"Failed building|Assertion|exit|return code|srun|[Ss]ignal|SIG|Segmentation|Aborted|Bus error|Illegal instr|"
    r"Floating point|Killed|Root Cause|rank|died with")
NOT_ERROR_LINE = re.compile(r"NCCL (?:INFO|DEBUG)|^(?:#|//|frame #\d|Exception raised from )")
WRAPPERS = ("ChildFailedError",)  # the launcher's report that a rank failed: the rank's own error is the failure


@dataclass(frozen=True)
class RaisedError:
    """One exception the report shows, with the traceback that ended in it (innermost frame last)."""

    exception: str
    message: str
    rank: int | None = None
    frames: tuple[Frame, ...] = ()
    statement: str | None = None  # `assert ...` when the innermost frame's source line is an assert statement


@dataclass(frozen=True)
class Failure:
    """What the report says failed: empty fields where the text does not show it."""

    frames: tuple[Frame, ...] = ()
    exception: str | None = None  # the final exception class, as printed: `RuntimeError`, `torch.OutOfMemoryError`
    message: str | None = None  # its message, first line
    raised: tuple[RaisedError, ...] = ()  # every distinct exception shown, in order; chained causes first
    exit_code: int | None = None
    signal: str | None = None  # `SIGKILL`, `SIGSEGV`, ...
    rank: int | None = None  # the failing rank, where a prefix, a launcher summary or a watchdog names it
    error_lines: tuple[str, ...] = ()  # NCCL, CUDA, compiler and launcher error lines, prefixes taken off

    @property
    def final(self) -> RaisedError | None:
        return next((r for r in reversed(self.raised) if r.exception == self.exception
                     and r.message == (self.message or "")), None)

    @property
    def deepest_framework_frame(self) -> Frame | None:
        """The innermost frame that one of the frameworks owns (not the user's code, not another library)."""
        return next((f for f in reversed(self.frames) if f.framework not in (None, "library")), None)


@dataclass
class _Stream:
    """One process's traceback in progress (ranks interleave their lines)."""

    key: str
    frames: list[Frame] = field(default_factory=list)
    file_indent: int | None = None
    last_source: str | None = None
    open: bool = False


@dataclass
class _Reader:
    streams: dict[str, _Stream] = field(default_factory=dict)
    open_streams: set[str] = field(default_factory=set)  # kept beside the streams: a per-line check stays O(1)
    raised: list[RaisedError] = field(default_factory=list)
    orphan_frames: tuple[Frame, ...] = ()
    error_lines: list[str] = field(default_factory=list)
    exits: ExitReader = field(default_factory=ExitReader)
    cpp: RaisedError | None = None  # a C++ abort being read: its `what():` and frames follow it

    def reading_traceback(self) -> bool:
        return bool(self.open_streams)

    def feed(self, line: LogLine) -> None:
        text = line.text[:MAX_LINE_CHARS]
        stripped = text.strip()
        if not stripped:
            return
        self.exits.feed(stripped, line.rank)
        stream = self._stream(line.stream)
        if TRACEBACK_START.match(stripped):
            self._close(stream)
            self._open(stream)
            return
        frame = python_frame(stripped)
        if frame is not None:
            self._frame(stream, frame, line.indent)
            return
        if stream.open and self._in_traceback(stream, line, stripped):
            if not stream.open:  # the traceback's own exception line
                self._keep_error_line(stripped)
            return
        self._keep_error_line(stripped)
        self._outside_traceback(stripped, line.rank)

    def _stream(self, key: str) -> _Stream:
        if key not in self.streams and len(self.streams) >= MAX_STREAMS:
            key = "..."
        return self.streams.setdefault(key, _Stream(key))

    def _open(self, stream: _Stream) -> None:
        stream.open = True
        self.open_streams.add(stream.key)

    def _frame(self, stream: _Stream, frame: Frame, indent: int) -> None:
        if not stream.open:  # a paste that starts mid-traceback
            self._open(stream)
        if len(stream.frames) < MAX_FRAMES:
            stream.frames.append(frame)
        stream.file_indent, stream.last_source = indent, None

    def _in_traceback(self, stream: _Stream, line: LogLine, stripped: str) -> bool:
        """Source lines, carets and the closing exception line; False when the traceback was cut off."""
        match = EXCEPTION_LINE.fullmatch(stripped)
        is_exception = bool(match and _is_exception_name(match.group(1)))
        deeper = stream.file_indent is not None and line.indent > stream.file_indent
        # A paste that lost its indentation: the line right after a frame is still that frame's source.
        after_frame = stream.file_indent is not None and stream.last_source is None and bool(stream.frames)
        if deeper or (after_frame and not is_exception):
            stream.last_source = stripped
            return True
        if match and is_exception:
            statement = ASSERT_STATEMENT.match(stream.last_source or "")
            self._raise(RaisedError(match.group(1), (match.group(2) or "").strip(), line.rank, tuple(stream.frames),
                                    f"assert {statement.group(1).strip()}" if statement else None))
            self._reset(stream)
            return True
        self._close(stream)
        return False

    def _outside_traceback(self, stripped: str, rank: int | None) -> None:
        if CHAINED.match(stripped):
            return
        if terminate := TERMINATE.search(stripped):
            self._flush_cpp()
            self.cpp = RaisedError(terminate.group(1), "", rank)
            return
        if self.cpp is not None:
            if what := WHAT.match(stripped):
                self.cpp = replace(self.cpp, message=what.group(1).strip())
                return
            if (frame := cpp_frame(stripped)) is not None:
                self.cpp = replace(self.cpp, frames=(*self.cpp.frames, frame)[:MAX_FRAMES])
                return
        quoted = QUOTED_EXCEPTION.search(stripped)
        if quoted and quoted.group(1) not in TOO_GENERIC_NAMES:
            opening = stripped[quoted.start() - 1] if quoted.start() else ""
            self._raise(RaisedError(quoted.group(1), _quoted_message(quoted.group(2) or "", opening), rank))

    def _flush_cpp(self) -> None:
        """A C++ abort is complete once something else is shown: its `what():` and frames come right after it."""
        if self.cpp is not None:
            pending, self.cpp = self.cpp, None
            self._raise(pending)

    def _close(self, stream: _Stream) -> None:
        """A traceback cut off before its exception line: keep its frames for a failure with none."""
        if stream.frames:
            self.orphan_frames = tuple(stream.frames)
        self._reset(stream)

    def _reset(self, stream: _Stream) -> None:
        stream.frames, stream.open, stream.file_indent, stream.last_source = [], False, None, None
        self.open_streams.discard(stream.key)

    def _raise(self, error: RaisedError) -> None:
        self._flush_cpp()
        known = next((i for i, r in enumerate(self.raised)
                      if (r.exception, r.message) == (error.exception, error.message)), None)
        if known is not None:  # every rank prints the same error: keep the first copy, with frames if any has them
            if error.frames and not self.raised[known].frames:
                self.raised[known] = error
            return
        if len(self.raised) >= MAX_RAISED:
            del self.raised[0]
        self.raised.append(error)

    def _keep_error_line(self, stripped: str) -> None:
        if not ERROR_LINE.search(stripped) or NOT_ERROR_LINE.search(stripped):
            return
        line = stripped[:300]
        if len(self.error_lines) < MAX_ERROR_LINES and line not in self.error_lines[-20:]:
            self.error_lines.append(line)

    def failure(self) -> Failure:
        self._flush_cpp()
        for stream in self.streams.values():
            self._close(stream)
        final = _final(self.raised)
        frames = (final.frames if final and final.frames else None) or _last_frames(self.raised) or self.orphan_frames
        exits = self.exits.result()
        rank = exits.rank if exits.rank is not None else (final.rank if final else None)
        return Failure(frames=frames, exception=final.exception if final else None,
                       message=final.message if final else None, raised=tuple(self.raised),
                       exit_code=exits.exit_code, signal=exits.signal,
                       rank=rank if rank is not None else exits.watchdog_rank,
                       error_lines=tuple(dict.fromkeys(self.error_lines)))


def parse_failure(text: str) -> Failure:
    """Read the failure a report shows (its traceback, final exception, exit code, signal and failing rank)."""
    if not isinstance(text, str):
        raise TypeError(f"parse_failure reads text, not {type(text).__name__}")
    reader = _Reader()
    for raw in _clip(text).splitlines():
        line = raw[:MAX_LINE_CHARS]
        if reader.cpp is not None or reader.reading_traceback() or WORTH_READING.search(line):
            reader.feed(read_line(line))
    return reader.failure()


def _clip(text: str) -> str:
    """Keep the head (the title and prose) and the tail (where the final error is) of a giant paste."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    head = MAX_TEXT_CHARS // 4
    return text[:head] + "\n" + text[-(MAX_TEXT_CHARS - head):]


def _is_exception_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
    return bool(last) and (last[0].isupper() or last.endswith("Error")) and last not in {"Note", "Warning"}


def _quoted_message(message: str, opening: str) -> str:
    """The message of an exception quoted in prose ends where its quote closes (`RuntimeError: ...` in backticks)."""
    closing = CLOSING_QUOTES.get(opening)
    if closing and closing in message:
        message = message[:message.rindex(closing) if closing == "'" else message.index(closing)]
    return message.strip().rstrip("`").strip()


def _final(raised: list[RaisedError]) -> RaisedError | None:
    """The last exception shown that is not the launcher's wrapper around a rank's failure."""
    own = [r for r in raised if not r.exception.endswith(WRAPPERS)] or raised
    return own[-1] if own else None


def _last_frames(raised: list[RaisedError]) -> tuple[Frame, ...]:
    return next((r.frames for r in reversed(raised) if r.frames), ())
