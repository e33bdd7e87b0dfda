"""Error signatures: the failures a report shows, each as a kind and a canonical text (`bot/reading/canonical.py`),
and a short stable digest of both that the case pack and the repository memory index (never the text itself).

Kinds: the final exception and the others shown (`exception`), assertion messages (`assertion`), CUDA, cuBLAS and
cuDNN errors (`cuda`), NCCL errors and watchdog timeouts (`nccl`), the signal that ended the process (`signal`) or
an exit code that means more than "it failed" (`exit_code`), `no_kernel_image`, a missing Python module
(`missing_module`) or shared library (`missing_library`), `undefined_symbol`, and compiler and extension-build
failures (`build`). A failure too generic to tell reports apart (a bare `RuntimeError`, an `AssertionError` with
no message, "error") gets no signature.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from bot.core.domain import ErrorSignature
from bot.reading.canonical import canonical_message, meaningful
from bot.reading.tracebacks import WRAPPERS, Failure, RaisedError, parse_failure

DIGEST_CHARS = 16
KINDS = ("exception", "assertion", "cuda", "nccl", "signal", "exit_code", "no_kernel_image", "missing_module",
         "missing_library", "undefined_symbol", "build")
# Kinds whose sharing alone makes two reports the same failure. A bare signal or exit code does not: on the gold
# data two threads ended by SIGKILL share their symptom 0.59 of the time (an OOM kill or a crash); see README.
MATCHING_KINDS = tuple(k for k in KINDS if k not in ("signal", "exit_code"))
# Signatures that name only the symptom, not its mechanism: an OOM or a collective that timed out or aborted has as
# many causes as reports. Two reports sharing one are the same symptom, not the same failure, so the comment never
# shows a precedent "with the same error" (or a possible duplicate) on one of these alone (`tells_mechanism`).
SYMPTOM_ONLY = re.compile(r"\bout of memory$|^Watchdog caught collective operation timeout$|"
                          r"^NCCL communicator was aborted|^nccl(?:SystemError|UnhandledCudaError|InternalError|"
                          r"RemoteError)$|^NCCL error in: [^,]{0,300}, (?:unhandled system error|unhandled cuda error|"
                          r"internal error|remote process exited or there was a network error)", re.IGNORECASE)
# The version of the canonical forms: a pack whose digests were made under another scheme cannot be matched.
SIGNATURE_SCHEME = "1"
GENERIC_EXIT_CODES = frozenset({0, 1})  # "it failed": every Python error ends so
# Canonical messages that Python or a launcher prints for any failure: they tell reports apart no better than
# the bare class (the failure itself is in another signature, such as `build`'s "ninja -v returned ...").
GENERIC_MESSAGES = frozenset({"list index out of range", "tuple index out of range", "string index out of range",
                              "division by zero", "Command '<LIST>' returned non-zero exit status <N>",
                              "Traceback (most recent call last)"})
# NCCL's error names as torch words them, mapped to NCCL's own result codes (so both spellings match).
NCCL_RESULTS = {"unhandled system error": "ncclSystemError", "unhandled cuda error": "ncclUnhandledCudaError",
                "internal error": "ncclInternalError", "invalid usage": "ncclInvalidUsage",
                "invalid argument": "ncclInvalidArgument",
                "remote process exited or there was a network error": "ncclRemoteError"}
CUDA_NAMED = re.compile(r"(?:CUDA error|cuda runtime error \(\d{1,4}\) ?|Triton Error \[CUDA\]): ?"
                        r"([a-z][a-z -]{3,80}[a-z])|\b(an illegal memory access was encountered|"
                        r"device-side assert triggered|misaligned address|unspecified launch failure)\b")
Rule = tuple[re.Pattern[str], str, Callable[[re.Match[str]], str | None]]


def _text(fixed: str) -> Callable[[re.Match[str]], str]:
    return lambda _: fixed


def _basename(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _canonical_if_meaningful(prefix: str, group: int = 1) -> Callable[[re.Match[str]], str | None]:
    def text(match: re.Match[str]) -> str | None:
        canonical = canonical_message(match.group(group))
        return f"{prefix}{canonical}" if meaningful(canonical) else None
    return text


def _cuda_named(match: re.Match[str]) -> str | None:
    name = (match.group(1) or match.group(2)).strip()
    if name.startswith(("out of memory", "no kernel image")):
        return None  # their own rules below
    return f"CUDA error: {name}"


def _import_name(match: re.Match[str]) -> str:
    origin = f" from '{match.group(2)}'" if match.group(2) else ""
    return f"cannot import name '{match.group(1)}'{origin}"


LINE_RULES: tuple[Rule, ...] = tuple((re.compile(pattern), kind, text) for pattern, kind, text in (
    (r"no kernel image is available for execution on the device", "no_kernel_image",
     _text("no kernel image is available for execution on the device")),
    (r"CUDA out of memory|CUDA error: out of memory|cudaErrorMemoryAllocation", "cuda", _text("CUDA out of memory")),
    (r"\b(CUBLAS_STATUS_[A-Z_]{2,40}|CUDNN_STATUS_[A-Z_]{2,40}|CUSOLVER_STATUS_[A-Z_]{2,40}|"
     r"CUSPARSE_STATUS_[A-Z_]{2,40}|cudaError[A-Z][A-Za-z]{2,60}|CUDA_ERROR_[A-Z_]{2,40})", "cuda",
     lambda m: None if m.group(1).endswith("SUCCESS") else m.group(1)),
    (CUDA_NAMED.pattern, "cuda", _cuda_named),
    (r"Assertion `([^`]{1,200})` failed", "assertion", _canonical_if_meaningful("Assertion failed: ")),
    (r"Watchdog caught collective operation timeout", "nccl", _text("Watchdog caught collective operation timeout")),
    (r"(?i:nccl).{0,300}?\b(" + "|".join(NCCL_RESULTS) + ")", "nccl", lambda m: NCCL_RESULTS[m.group(1)]),
    (r"\b(nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError))\b", "nccl",
     lambda m: m.group(1)),
    (r"NCCL communicator was aborted", "nccl", _text("NCCL communicator was aborted")),
    (r"NCCL WARN (.{4,300})", "nccl", _canonical_if_meaningful("NCCL WARN ")),
    (r"No module named '?([\w.]{1,200}?)'?(?:$|[^\w.])", "missing_module",
     lambda m: f"No module named '{m.group(1).rstrip('.')}'"),
    (r"cannot import name '?(\w{1,200})'?(?: from '?([\w.]{1,200}?)'?(?:$|[^\w.]))?", "missing_module", _import_name),
    (r"\b([\w+-]{1,100}?)\.so(?:\.[\d.]{1,20})?: cannot open shared object file", "missing_library",
     lambda m: f"{m.group(1)}.so: cannot open shared object file"),
    (r"(?:undefined symbol|Symbol not found): (\w{1,300})", "undefined_symbol",
     lambda m: f"undefined symbol: {m.group(1)}"),
    (r"error: command '([^']{1,300})' failed", "build", lambda m: f"command '{_basename(m.group(1))}' failed"),
    (r"ninja: build stopped: subcommand failed", "build", _text("ninja: build stopped: subcommand failed")),
    (r"Error building extension '([\w.-]{1,100})'", "build", lambda m: f"Error building extension '{m.group(1)}'"),
    (r"Command '\['ninja', '-v'", "build", _text("ninja -v returned non-zero exit status")),
    (r"nvcc fatal\s?: (.{3,200})", "build", _canonical_if_meaningful("nvcc fatal: ")),
    (r"fatal error: ([\w./+-]{1,200}): No such file or directory", "build",
     lambda m: f"fatal error: {_basename(m.group(1))}: No such file or directory"),
    (r"#error -- unsupported (GNU|clang|Microsoft Visual Studio) version", "build",
     lambda m: f"unsupported {m.group(1)} version"),
    (r"Failed building wheel for ([\w.-]{1,100})", "build",
     lambda m: f"Failed building wheel for {m.group(1).lower()}"),
    (r"\.(?:cu|cuh|cpp|cc|h|hpp)(?:\(\d{1,7}\)|:\d{1,7}(?::\d{1,7})?): (?:fatal )?error: (.{3,200})", "build",
     _canonical_if_meaningful("compile error: ")),
))


def signature(kind: str, text: str) -> ErrorSignature:
    """A signature of `kind` with canonical `text`; its digest is a short hash of both."""
    digest = hashlib.sha256(f"{kind}\n{text}".encode()).hexdigest()[:DIGEST_CHARS]
    return ErrorSignature(kind=kind, text=text, digest=digest)


def error_signatures(text: str) -> tuple[ErrorSignature, ...]:
    """The error signatures of a report's text: its final exception first, then the others in the order shown."""
    return failure_signatures(parse_failure(text))


def failure_signatures(failure: Failure) -> tuple[ErrorSignature, ...]:
    """The signatures of a failure already parsed (the normaliser parses once and calls this)."""
    found: dict[str, ErrorSignature] = {}
    final = failure.final
    raised = ([final] if final else []) + [r for r in failure.raised if r is not final]
    candidates = [s for r in raised for s in _from_raised(r)]
    candidates += [s for line in failure.error_lines for s in _from_line(line)]
    candidates += _from_exit(failure)
    for found_signature in candidates:
        found.setdefault(found_signature.digest, found_signature)
    return tuple(found.values())


def _from_raised(raised: RaisedError) -> list[ErrorSignature]:
    name = raised.exception.rsplit(".", 1)[-1]  # `torch.cuda.OutOfMemoryError` and `torch.OutOfMemoryError` alike
    if raised.exception.endswith(WRAPPERS):
        return []
    message = canonical_message(raised.message, whole_line=name == "AssertionError")
    if name == "AssertionError":  # a framework's own check: its later sentences name the keys it checked
        if not meaningful(message) and raised.statement:
            message = canonical_message(raised.statement, whole_line=True)
        return [signature("assertion", f"AssertionError: {message}")] if meaningful(message) else []
    if not meaningful(message) or message in GENERIC_MESSAGES:
        return []
    return [signature("exception", f"{name}: {message}")]


def _from_line(line: str) -> list[ErrorSignature]:
    out = []
    for pattern, kind, text_of in LINE_RULES:
        match = pattern.search(line)
        if match is not None and (text := text_of(match)):
            out.append(signature(kind, text))
    return out


def _from_exit(failure: Failure) -> list[ErrorSignature]:
    if failure.signal:
        return [signature("signal", failure.signal)]
    if failure.exit_code is not None and failure.exit_code not in GENERIC_EXIT_CODES:
        return [signature("exit_code", f"exit code {failure.exit_code}")]
    return []


def tells_mechanism(signature: ErrorSignature) -> bool:
    """Whether sharing this signature makes two reports the same failure: a matching kind (not a bare signal or
    exit code) whose message names more than the symptom (not "CUDA out of memory", not a watchdog timeout)."""
    message = signature.text.split(": ", 1)[1] if signature.kind == "exception" and ": " in signature.text else (
        signature.text)
    return signature.kind in MATCHING_KINDS and not SYMPTOM_ONLY.search(message)
