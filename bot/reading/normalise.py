"""Normalisation: strip issue-template boilerplate, shorten logs to their signal, pull out environment facts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.core.domain import EnvironmentFacts, ErrorSignature, Issue
from bot.reading.cues import template_heading
from bot.reading.signatures import failure_signatures
from bot.reading.tracebacks import Failure, parse_failure

MAX_BODY_CHARS = 4000
MAX_INPUT_CHARS = 200_000
MAX_SIGNAL_LINES = 40
KEEP_LAST_FRAMES = 4

# Lines of issue templates that carry no information about the problem (DeepSpeed, Megatron, Colossal-AI, ...).
BOILERPLATE = re.compile(
    r"^\s*(?:"
    r"a clear and concise description of .*|"
    r"steps to reproduce the behaviou?r:?|"
    r"if applicable,? add screenshots.*|"
    r"add any other context about the problem here\.?|"
    r"please (?:complete|run|provide|include|describe|paste|make sure) .*|"
    r"steps to reproduce the behaviou?r\. the easier .*|"
    r"if applicable,? add (?:the )?(?:stack trace|logs|screenshots).*|"
    r"ask a clear and concise question .*|"
    r"add any other context (?:or screenshots )?about the (?:problem|feature request) here\.?|"
    r"(?:- )?\[[ x]\] .*(?:searched|read|checked|agree).*|"
    r"\*\*(?:screenshots|additional context|system info.*?)\*\*:?|"
    r"#+ ?(?:screenshots|additional context)|"
    r"\S+ · (?:description|comment|review|commit) · \d{4}-\d\d-\d\d"
    r")\s*$",
    re.IGNORECASE,
)
HEADING = re.compile(r"^\s*(?:#{1,6}\s+.+|\*\*[^*]{2,60}\*\*:?)\s*$")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
RANK_PREFIX = re.compile(r"^\s*(?:\[(?:rank|default)?\d+\]:?|\S+:\d+:\d+ \[\d+\]|\d+: )\s*", re.IGNORECASE)
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.\d]*")
SIGNAL = re.compile(
    r"(?:error|exception|traceback|raise |assert|failed|failure|fatal|abort|killed|segmentation fault|"
    r"core dumped|out of memory|\boom\b|watchdog|timed? ?out|timeout|hang|deadlock|nccl|cuda|cudnn|cublas|"
    r"undefined symbol|no module named|ninja|nvcc|illegal|nan\b|\binf\b|overflow|mismatch|not supported|"
    r"warning: |signal \d+|exitcode|return code|sigsegv|sigabrt|sigkill)",
    re.IGNORECASE,
)
FRAME = re.compile(r'^\s*File ".*", line \d+')


@dataclass(frozen=True)
class NormalisedIssue:
    """The text the models read, and the facts pulled out of it."""

    title: str
    body: str
    signal: tuple[str, ...]
    environment: EnvironmentFacts
    failure: Failure = field(default_factory=Failure)  # frames, final exception, exit code, signal, rank
    signatures: tuple[ErrorSignature, ...] = ()  # its canonical error signatures (bot/reading/signatures.py)
    templates: tuple[str, ...] = ()  # kinds of issue template whose headings the body carried (bot/reading/cues.py)
    report_body: str | None = None  # the body bounded by MAX_INPUT_CHARS only (what the facts read), when asked

    @property
    def report(self) -> str | None:
        """What the reporter wrote (title and body, boilerplate and unfilled sections dropped), when asked for."""
        return None if self.report_body is None else f"{self.title}\n{self.report_body}"

    @property
    def digests(self) -> tuple[str, ...]:
        """What a case index and the pack keep of the signatures: their digests, sorted, never their text."""
        return tuple(sorted({s.digest for s in self.signatures}))

    @property
    def text(self) -> str:
        """Title, the error lines, then the rest: the head of this string matters most to the embedder."""
        head = "\n".join(self.signal[:4])
        return "\n".join(part for part in (self.title, head, self.body) if part)


def normalise(issue: Issue, max_chars: int = MAX_BODY_CHARS, *, report: bool = False) -> NormalisedIssue:
    """Normalise one issue for embedding, classification and prompting; with `report`, keep the body bounded by
    MAX_INPUT_CHARS only too (`report_body`, what the facts read: a triage normalises its issue once)."""
    body = HTML_COMMENT.sub("", _clip(issue.body or ""))
    lines, templates = _drop_template_headings(_drop_boilerplate(body.replace("\r\n", "\n").split("\n")))
    lines = _drop_empty_sections(_dedupe_log_lines(lines))
    signal = tuple(_signal_lines(lines))
    whole = "\n".join(lines).strip()
    text = whole if len(whole) <= max_chars else _shorten(lines, max_chars)
    report_body = (whole if len(whole) <= MAX_INPUT_CHARS else _shorten(lines, MAX_INPUT_CHARS)) if report else None
    title = (issue.title or "").strip()
    failure = parse_failure(f"{title}\n{body}")  # the title first: the body's traceback is the final word
    return NormalisedIssue(title=title, body=text, signal=signal,
                           environment=extract_environment(f"{title}\n{issue.body or ''}", issue.repo),
                           failure=failure, signatures=failure_signatures(failure), templates=templates,
                           report_body=report_body)


def _clip(body: str) -> str:
    """Bound the work on giant pastes: keep the head (the prose) and the tail (where the final error is)."""
    if len(body) <= MAX_INPUT_CHARS:
        return body
    head = MAX_INPUT_CHARS // 4
    return body[:head] + "\n[...]\n" + body[-(MAX_INPUT_CHARS - head):]


def _drop_boilerplate(lines: list[str]) -> list[str]:
    return [line.rstrip() for line in lines if not BOILERPLATE.match(line)]


def _drop_template_headings(lines: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Drop the issue templates' section headings (the same in every report of a repository, they pull
    unrelated reports together in the embedding); keep the kinds of template they showed, in order."""
    kept: list[str] = []
    kinds: list[str] = []
    for line in lines:
        kind = template_heading(line)
        if kind is None:
            kept.append(line)
        elif kind and kind not in kinds:
            kinds.append(kind)
    return kept, tuple(kinds)


def _dedupe_log_lines(lines: list[str]) -> list[str]:
    """Every rank prints the same error: keep the first copy of a line (ignoring rank and time prefixes)."""
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        key = TIMESTAMP.sub("", RANK_PREFIX.sub("", line)).strip()
        if key and len(key) > 20 and key in seen:
            continue
        seen.add(key)
        out.append(line)
    return out


def _drop_empty_sections(lines: list[str]) -> list[str]:
    """Remove headings followed only by blank lines up to the next heading (a template left unfilled)."""
    is_heading = [bool(HEADING.match(line)) for line in lines]
    filled = [False] * len(lines)  # for a heading: does any text follow before the next heading?
    seen = False
    for i in range(len(lines) - 1, -1, -1):
        if is_heading[i]:
            filled[i], seen = seen, False
        elif lines[i].strip():
            seen = True
    out = [line for i, line in enumerate(lines) if not is_heading[i] or filled[i]]
    while out and not out[-1].strip():
        out.pop()
    return [line for i, line in enumerate(out) if line.strip() or (i and out[i - 1].strip())]


def _signal_lines(lines: list[str]) -> list[str]:
    """Exception and error lines, without traceback frames and code, most specific first."""
    found: list[str] = []
    known: set[str] = set()
    for line in lines:
        stripped = RANK_PREFIX.sub("", line).strip()
        if not stripped or FRAME.match(stripped) or len(stripped) > 400:
            continue
        is_exception = re.match(r"^[\w.]*(?:Error|Exception|Interrupt)\b:?", stripped)
        is_signal = SIGNAL.search(stripped) and not stripped.startswith(("#", "import ", "from "))
        if (is_exception or is_signal) and stripped not in known:
            known.add(stripped)
            found.append(stripped)
    exceptions = [s for s in found if re.match(r"^[\w.]*(?:Error|Exception)\b", s)]
    first = set(exceptions)
    return (exceptions + [s for s in found if s not in first])[:MAX_SIGNAL_LINES]


def _shorten(lines: list[str], max_chars: int) -> str:
    """Keep prose, error lines and the last frames of each traceback; mark what was cut with [...]."""
    keep = [False] * len(lines)
    frames: list[int] = []
    prose_budget = max_chars // 3
    in_code = False
    for i, line in enumerate(lines):
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        if FRAME.match(line):
            frames.append(i)
            continue
        if SIGNAL.search(line) or re.match(r"^\s*[\w.]*(?:Error|Exception)\b", line):
            keep[i] = True
            for j in frames[-KEEP_LAST_FRAMES:]:
                keep[j] = keep[j + 1] = True if j + 1 < len(lines) else keep[j]
            frames = []
        elif not in_code and prose_budget > 0 and line.strip():
            keep[i] = True
            prose_budget -= len(line)
    out: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        if not keep[i]:
            if out and out[-1] != "[...]":
                out.append("[...]")
            continue
        piece = line[:400]
        if size + len(piece) > max_chars:
            out.append("[...]")
            break
        out.append(piece)
        size += len(piece) + 1
    return "\n".join(out).strip()


_V = r"v?(\d+\.\d+(?:\.\d+)?(?:\.?(?:post|dev|rc|a|b)\d+)?(?:\+[\w.]+)?)"
_SEP = r"(?:\s*(?:version|ver)\b)?[\s.:=,|`*-]*"
FRAMEWORKS = {
    "deepspeed": "DeepSpeed", "megatron-core": "Megatron-LM", "megatron": "Megatron-LM",
    "colossalai": "Colossal-AI", "colossal-ai": "Colossal-AI", "horovod": "Horovod",
}
REPO_FRAMEWORKS = {"deepspeed": "DeepSpeed", "megatron": "Megatron-LM", "colossal": "Colossal-AI",
                   "horovod": "Horovod", "pytorch": "PyTorch", "tensorflow": "TensorFlow", "keras": "Keras"}
GPU = (r"(?:NVIDIA\s+)?(?:Tesla\s+)?(?:GeForce\s+)?(A100|H100|H200|H800|A800|V100|A10G|A10|A6000|A40|L40S|L40|L4|"
       r"T4|P100|RTX\s?\d{4}(?:\s?Ti)?|GTX\s?\d{4}|MI\d{3}X?|Ascend\s?910\w*|Gaudi\s?\d?)")


def _first(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text, re.IGNORECASE)
    return match.group(1) if match else None


def extract_environment(text: str, repo: str | None = None) -> EnvironmentFacts:
    """Framework, versions, GPU type and count, and node count, as far as the text states them."""
    text = text[:200_000]
    framework, version = None, None
    for key, name in FRAMEWORKS.items():
        found = _first(rf"\b{re.escape(key)}{_SEP}{_V}", text)
        if found:
            framework, version = name, found
            break
    if framework is None and repo:
        framework = next((n for k, n in REPO_FRAMEWORKS.items() if k in repo.lower()), None)
    cuda = _first(r"\bcuda(?:\s*(?:toolkit|runtime|driver))?" + _SEP + r"v?(\d{2}\.\d)", text) or \
        _first(r"release (\d+\.\d+), V", text)
    if cuda is None and (cu := _first(r"\+cu(\d{3})\b", text)):
        cuda = f"{cu[:-1]}.{cu[-1]}"
    gpu = _first(r"\b" + GPU + r"\b", text)
    return EnvironmentFacts(
        framework=framework, framework_version=version,
        torch=_first(rf"\b(?:py)?torch{_SEP}{_V}", text),
        cuda=cuda,
        nccl=_first(rf"\bnccl{_SEP}{_V}", text),
        python=_first(r"\bpython" + _SEP + r"v?(3\.\d+(?:\.\d+)?)", text),
        gpu=re.sub(r"\s+", " ", gpu).upper() if gpu else None,
        gpu_count=_gpu_count(text),
        nodes=_int(_first(r"(?:--nnodes|--num_nodes|num_nodes)[=\s]+(\d+)", text)
                   or _first(r"\b(\d+)\s+(?:nodes|machines|servers)\b", text)),
    )


def _gpu_count(text: str) -> int | None:
    found = (_first(r"\b(\d+)\s*[x×*]\s*" + GPU, text) or _first(GPU + r"\s*[x×*]\s*(\d+)\b", text)
             or _first(r"(?:--nproc_per_node|--num_gpus|--gpus)[=\s]+(\d+)", text)
             or _first(r"\b(\d+)\s+(?:\w+\s)?GPUs\b", text))
    if found and not found.isdigit():  # GPU x N matched: the count is the second group
        match = re.search(GPU + r"\s*[x×*]\s*(\d+)\b", text, re.IGNORECASE)
        found = match.group(2) if match else None
    return _int(found)


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and 0 < int(value) < 100_000 else None
