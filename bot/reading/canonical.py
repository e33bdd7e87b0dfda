"""The canonical form of an error message: what varies between two reports of the same failure becomes a
placeholder (numbers, sizes, shapes, ranks, PIDs, paths, addresses, hex, timestamps, versions, URLs and the
values an author chose: file names, quoted strings, model and parameter names), while what tells failures apart
stays (identifiers such as a config key, a module, a CUDA error's name).

Rules run in order on one line; every pattern is linear (no nested quantifiers; a run of path characters is read
from its start only, possessively), so hostile text costs little.
"""

from __future__ import annotations

import re

MAX_INPUT_CHARS = 1_000
MAX_CANONICAL_CHARS = 160
MIN_SENTENCE_CHARS = 15

_Rule = tuple[re.Pattern[str], str]


def _rules(*pairs: tuple[str, str]) -> tuple[_Rule, ...]:
    return tuple((re.compile(pattern), placeholder) for pattern, placeholder in pairs)


# Templates whose slot is the author's own value (their model class, their parameter names, their keys).
AUTHOR_VALUES = _rules(
    (r"(state_dict for )[\w.]{1,200}", r"\1<NAME>"),
    (r"((?:Missing|Unexpected) key\(s\) in state_dict:).*", r"\1 <KEYS>"),
    (r"(size mismatch for )[\w.]{1,300}", r"\1<NAME>"),
    (r"(Can't load (?:tokenizer|config|the model) for ).*", r"\1<VALUE>"),
    (r"(The name )\"[^\"]{0,200}\"", r"\1<VALUE>"),
)
PLACEHOLDERS = _rules(
    (r"\bhttps?://\S{1,500}", "<URL>"),
    (r"\b\d{4}-\d\d-\d\d(?:[ T_]\d\d:\d\d(?::\d\d(?:[.,]\d{1,9})?)?)?", "<TIME>"),
    (r"\b\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\b", "<TIME>"),
    (r"\b0x[0-9a-fA-F]{1,32}\b", "<ADDR>"),
    (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<HEX>"),
    # Paths: absolute, home, relative with `./` `../`, Windows, or three components; a line number goes with them.
    (r"(?<![\w.+@~/\\-])(?:~|\.{1,2}|[A-Za-z]:)?(?:[/\\][\w.+@~-]{1,255}+){2,64}[/\\]?(?::\d{1,7})?", "<PATH>"),
    (r"(?<![\w/])/[\w.+-]{1,255}(?::\d{1,7})?(?![\w/])", "<PATH>"),
    (r"(?<![\w.-])[\w.-]{1,200}+(?:/[\w.+-]{1,200}+){2,64}(?::\d{1,7})?", "<PATH>"),
    # A file the author named (their script, data or checkpoint), but not a library (`libcudart.so`, `cuda.h`).
    (r"(?<![\w-])[\w-]{1,200}+\.(?:py|sh|json|yaml|yml|txt|bin|pt|pth|ckpt|safetensors|log|csv|jsonl|npy|idx|model)"
     r"(?::\d{1,7})?\b", "<FILE>"),
    (r"\b(?:PID|pid|TID|tid)\b(?: ?[:=])? ?\d{1,9}", "PID <PID>"),
    (r"\b(?:local_rank|global_rank|rank|RANK|Rank)\b(?: ?[:=])? ?\d{1,7}", "rank <RANK>"),
    (r"\bv?\d{1,4}\.\d{1,4}\.\d{1,6}(?:[.+-][A-Za-z0-9]{1,40}){0,4}\b", "<VER>"),
    (r"\b((?:version|Version|VERSION|ver\.?)\s?)v?\d{1,4}(?:\.\d{1,6}){1,3}\b", r"\1<VER>"),
    (r"\b\d{1,12}(?:\.\d{1,12})? ?(?:[KMGTP]i?B|bytes|[KMGT]B)\b", "<SIZE>"),
    (r"torch\.Size\(\[[\d, ]{0,200}\]\)", "torch.Size(<SHAPE>)"),
    (r"\[ ?-?\d{1,12}(?: ?, ?-?\d{1,12}){1,16} ?,? ?\]", "<SHAPE>"),
    (r"\( ?-?\d{1,12}(?: ?, ?-?\d{1,12}){1,16} ?,? ?\)", "<SHAPE>"),
    (r"\b\d{1,12}(?:x\d{1,12}){1,16}\b", "<SHAPE>"),
    (r"\b(?=[0-9a-f]{0,64}[a-f])(?=[0-9a-f]{0,64}\d)[0-9a-f]{8,64}\b", "<HEX>"),
    (r"(?<![\w<.])-?\d{1,30}(?:\.\d{1,30})?(?:e[+-]?\d{1,4})?(?![\w>])", "<N>"),
    (r"'\[[^\]\n]{0,500}\]'", "'<LIST>'"),  # a command or a list of keys, as Python prints it
    (r"\"[^\"\n]{0,300}\"", "<VALUE>"),  # double quotes hold the author's strings; identifiers come single-quoted
)
SINGLE_QUOTED = re.compile(r"(?<!\w)'([^'\n]{0,300}?)'(?!\w)")
LOCATION_ONLY = re.compile(r"\s?\((?:<(?:PATH|FILE|URL|ADDR)>[ ,]{0,2}){1,8}\)")
# Tails that differ by library version or environment, not by failure.
TAILS = re.compile(r" ?\(run with NCCL_DEBUG=INFO for details\)|,? NCCL version <VER>.*| ?\(most recent call first\)")
# The end of the first sentence; `, but ...` starts the observed values (`..., but found cuda:0 and cpu`).
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.;!?](?=\s)|, but ")
# Words that carry no failure of their own: a message of only these (and placeholders) is too generic to match on.
FILLER = frozenset({"error", "errors", "failed", "failure", "fail", "exception", "occurred", "unknown", "the", "an",
                    "of", "in", "to", "is", "was", "for", "with", "at", "on", "and", "or", "not", "see", "above",
                    "below", "details", "message", "got", "raised", "called", "call", "traceback", "none", "true",
                    "false", "something", "wrong", "went", "bug", "issue", "problem", "internal"})
SPACES = re.compile(r"\s{1,1000}")
REPEATS = re.compile(r"(<[A-Z]{1,8}>)(?:[ ,x*]{1,3}\1){1,200}")


def canonical_message(message: str, whole_line: bool = False) -> str:
    """The first line of `message` with what varies between reports replaced by placeholders, cut to its first
    sentence (unless `whole_line`) and to at most MAX_CANONICAL_CHARS."""
    line = message.strip().split("\n", 1)[0][:MAX_INPUT_CHARS]
    line = SPACES.sub(" ", line).strip().strip("`").strip()
    for pattern, placeholder in AUTHOR_VALUES + PLACEHOLDERS:
        line = pattern.sub(placeholder, line)
    line = SINGLE_QUOTED.sub(_quoted, line)
    line = LOCATION_ONLY.sub("", TAILS.sub("", line))
    line = REPEATS.sub(r"\1, ...", line)
    return _cut(line, whole_line)


def _quoted(match: re.Match[str]) -> str:
    """A single-quoted identifier (a config key, a module, an attribute) stays; a phrase, path or long value goes."""
    value = match.group(1)
    if len(value) > 60 or any(c in value for c in " \t/\\:"):
        return "'<VALUE>'"
    return match.group(0)


def _cut(line: str, whole_line: bool) -> str:
    for end in () if whole_line else SENTENCE_END.finditer(line):
        if end.start() >= MIN_SENTENCE_CHARS:
            line = line[:end.start()]
            break
    if len(line) > MAX_CANONICAL_CHARS:
        line = line[:MAX_CANONICAL_CHARS].rsplit(" ", 1)[0]
    return line.rstrip(" .,:;!").strip()


def meaningful(text: str) -> bool:
    """Does a canonical message say anything beyond placeholders and filler words ("error", "failed")?"""
    words = [w for w in re.findall(r"[A-Za-z_]{2,}", re.sub(r"<[A-Z]+>", " ", text)) if w.lower() not in FILLER]
    return sum(len(w) for w in words) >= 8
