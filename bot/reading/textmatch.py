"""Case-insensitive line patterns over issue text, with work bounded on giant pastes.

A pattern runs only on the lines that contain its longest required literal (found with one `str.find` over the
lowered text), and each line is at most MAX_LINE_CHARS long, so a 200 KB log costs a few `find` calls per pattern,
not a regular-expression scan per pattern. Patterns are line-local by construction and must not backtrack without
bound (no `.*` / `.+`, no quantified group inside a quantifier): `compile_pattern` refuses them.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

MAX_INPUT_CHARS = 200_000  # as reading/normalise.py: a giant paste keeps its head (prose) and tail (the final error)
MAX_LINE_CHARS = 1_000  # an error line is shorter; a longer line (minified JSON, a progress bar) is cut
MIN_LITERAL = 3  # a shorter required literal filters too little to be worth it

# Prefixes that launchers and loggers put before a line, removed (repeatedly) before matching.
LOG_PREFIX = re.compile(
    r"""^(?:\s*(?:
        \[(?:rank|default)?\d+\]:?                       # [rank3]: [default0]: [2]
      | \[\d+,\d+\]<std(?:out|err)>:                     # [1,0]<stderr>: of mpirun
      | \d{1,3}(?:\.\d{1,3}){3}:                         # 10.0.0.2: of pdsh
      | [A-Za-z][\w.-]{0,40}\d[\w.-]{0,20}:(?=\s)        # node-01: a host name has a digit; RuntimeError: has none
      | \S{1,60}:\d+:\d+\s\[\d+\]                        # host:pid:tid [gpu] of NCCL
      | \d{1,4}:(?=\s)                                   # 0: of torchrun --tee
      | \[?\d{4}-\d\d-\d\d[\sT]\d\d:\d\d:\d\d[\d.,:]*(?:\s?[+-]\d\d:?\d\d)?\]?   # timestamps
      | \[?[EWIF]\d{4}\s\d\d:\d\d:\d\d[\d.]*(?:\s\d+)?\s[\w./-]+:\d+\]          # glog: [E1101 17:03:05.82 x.cpp:607]
    ))+\s*""",
    re.VERBOSE,
)
# Checked on the pattern with escapes and character classes blanked out (`\.`, `[.+-]` hold no quantifier).
_ESCAPE_OR_CLASS = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]")
_UNBOUNDED_DOT = re.compile(r"\.[*+]")
_CLASS_ESCAPES = set("dDwWsSbBAZzGnrtfv0123456789")  # escapes that are not one literal character
_SPECIAL = set(".^$*+?{}[]()|")


@dataclass(frozen=True)
class LinePattern:
    """A compiled pattern and the literal (lower case) that every match contains, when it has one."""

    regex: re.Pattern[str]
    literal: str | None


def compile_pattern(pattern: str) -> LinePattern:
    """Compile case-insensitively; ValueError when it does not compile or could backtrack without bound."""
    shape = _ESCAPE_OR_CLASS.sub("x", pattern)
    if _UNBOUNDED_DOT.search(shape) or _has_nested_quantifier(shape):
        raise ValueError(f"pattern {pattern!r} may backtrack without bound; use bounded repeats such as .{{0,80}} "
                         "and no quantified group inside a quantifier")
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} does not compile ({exc})") from None
    return LinePattern(regex, required_literal(pattern))


def _has_nested_quantifier(shape: str) -> bool:
    """Whether a group holding `*` or `+` (at any depth) is itself repeated: `(a+)+`, `(?:-x+(?:=x+)?x+)*`."""
    open_groups: list[bool] = []  # per open group: does it hold an unbounded repeat so far
    for i, char in enumerate(shape):
        if char == "(":
            open_groups.append(False)
        elif char in "*+" and i > 0 and shape[i - 1] not in "(*+?":
            open_groups[:] = [True] * len(open_groups)
        elif char == ")" and open_groups:
            holds_unbounded = open_groups.pop()
            if holds_unbounded and shape[i + 1:i + 2] in ("*", "+", "{"):
                return True
    return False


def required_literal(pattern: str) -> str | None:
    """The longest run of plain characters outside groups, classes and alternatives that every match contains."""
    runs: list[str] = []
    run: list[str] = []
    i, depth = 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            i += 2
            if depth == 0 and escaped not in _CLASS_ESCAPES and not escaped.isalpha():
                run.append(escaped)
                i = _after_quantifier(pattern, i, run, runs)
                continue
            runs.append("".join(run))
            run = []
            continue
        if char in "[{":  # a class, or the bounds of a repeat: no literal inside either
            i = _skip_class(pattern, i) if char == "[" else pattern.find("}", i) % (len(pattern) + 1) + 1
            runs.append("".join(run))
            run = []
            continue
        if char == "|" and depth == 0:
            return None  # a top-level alternative: no literal is required
        depth += (char == "(") - (char == ")")
        if depth == 0 and char not in _SPECIAL:
            run.append(char)
            i = _after_quantifier(pattern, i + 1, run, runs)
            continue
        runs.append("".join(run))
        run = []
        i += 1
    best = max(["".join(run), *runs], key=len)
    return best.lower() if len(best) >= MIN_LITERAL else None


def _after_quantifier(pattern: str, i: int, run: list[str], runs: list[str]) -> int:
    """A quantifier makes the character before it optional (or repeated): it ends the run without that character."""
    if i < len(pattern) and pattern[i] in "?*+{":
        run.pop()
        runs.append("".join(run))
        run.clear()
    return i


def _skip_class(pattern: str, i: int) -> int:
    i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def clean_lines(title: str, body: str) -> list[str]:
    """Title and body as patterns see them: bounded, log prefixes removed, a line repeated by every rank once."""
    if len(body) > MAX_INPUT_CHARS:
        head = MAX_INPUT_CHARS // 4
        body = body[:head] + "\n" + body[-(MAX_INPUT_CHARS - head):]
    seen: set[str] = set()
    lines: list[str] = []
    for raw in f"{title}\n{body}".splitlines():
        line = LOG_PREFIX.sub("", raw[:MAX_LINE_CHARS].replace("\t", " ")).strip().strip("`").strip()
        if line and line not in seen:
            seen.add(line)
            lines.append(line)
    return lines


class LineIndex:
    """The cleaned lines of one issue, searchable by LinePattern."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        lowered = [line.lower() for line in lines]
        self.lowered = "\n".join(lowered)
        self.starts: list[int] = []
        offset = 0
        for line in lowered:
            self.starts.append(offset)
            offset += len(line) + 1

    def candidates(self, pattern: LinePattern) -> list[str]:
        """The lines that can match: those holding the pattern's literal, or every line when it has none."""
        if pattern.literal is None:
            return self.lines
        found: list[str] = []
        position = self.lowered.find(pattern.literal)
        while position >= 0:
            index = bisect_right(self.starts, position) - 1
            found.append(self.lines[index])
            following = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.lowered)
            position = self.lowered.find(pattern.literal, following)
        return found

    def matching_lines(self, pattern: LinePattern) -> list[str]:
        return [line for line in self.candidates(pattern) if pattern.regex.search(line)]
