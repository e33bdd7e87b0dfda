"""Traceback frames: where each one runs (the module guessed from its path) and which framework owns it."""

from __future__ import annotations

import re
from dataclasses import dataclass

FRAMEWORKS = ("deepspeed", "megatron", "colossalai", "torch", "transformers")
LIBRARY = "library"  # an installed package that is none of the frameworks (apex, transformer_engine, the stdlib)
# A framework's checkout under its repository's own name, run in place (`/workspace/Megatron-LM/pretrain_gpt.py`).
CHECKOUT_DIRS = {"megatron-lm": "megatron", "megatron-deepspeed": "megatron", "deepspeed": "deepspeed",
                 "colossalai": "colossalai", "transformers": "transformers", "pytorch": "torch"}
INSTALLED = ("site-packages", "dist-packages")
STDLIB_DIR = re.compile(r"python\d(?:\.\d{1,2})?")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
PYTHON_FRAME = re.compile(r'File "([^"]{1,500})", line (\d{1,7})(?:, in (\S.{0,200}))?')
# `frame #3: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(...) + 0x1d2 (0x7f... in /usr/lib/.../libtorch_cuda.so)`
CPP_FRAME = re.compile(r"frame #\d{1,4}: (.{1,300}?)(?: \+ 0x[0-9a-f]{1,16})? "
                       r"\((?:0x[0-9a-f]{1,16} in )?([^()]{1,300})\)")
CPP_LIBRARIES = (("libtorch", "torch"), ("libc10", "torch"), ("_C.", "torch"), ("deepspeed", "deepspeed"),
                 ("colossalai", "colossalai"), ("megatron", "megatron"))


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback; `framework` is one of FRAMEWORKS, LIBRARY, or None for the user's own code."""

    path: str
    module: str | None
    function: str
    line: int | None
    framework: str | None


def python_frame(line: str) -> Frame | None:
    """A Python traceback's `File "...", line N, in f` line, or None."""
    match = PYTHON_FRAME.match(line)
    if match is None:
        return None
    path = match.group(1)
    module, framework = guess_module(path)
    return Frame(path=path, module=module, function=(match.group(3) or "").strip(), line=int(match.group(2)),
                 framework=framework)


def cpp_frame(line: str) -> Frame | None:
    """A C++ stack frame as c10 prints it under `terminate called ...`, or None."""
    match = CPP_FRAME.match(line)
    if match is None:
        return None
    library = match.group(2).strip()
    _, owner = guess_module(library)  # an extension inside an installed framework belongs to it
    if owner in (None, LIBRARY):
        owner = next((fw for needle, fw in CPP_LIBRARIES if needle in library.rsplit("/", 1)[-1]), LIBRARY)
    return Frame(path=library, module=None, function=match.group(1).strip(), line=None, framework=owner)


def guess_module(path: str) -> tuple[str | None, str | None]:
    """The dotted module a file path holds, and its owner (a framework, LIBRARY, or None for the user's code)."""
    if path.startswith("<"):  # `<frozen runpy>`, `<string>`, `<stdin>`
        return None, LIBRARY if path.startswith("<frozen") else None
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts:
        return None, None
    for marker in INSTALLED:
        if marker in parts:
            inside = parts[len(parts) - parts[::-1].index(marker):]
            return _dotted(inside), _owner(inside[0]) if inside else LIBRARY
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in FRAMEWORKS:
            return _dotted(parts[i:]), parts[i]
    for i in range(len(parts) - 2, -1, -1):
        if parts[i].lower() in CHECKOUT_DIRS:
            return _dotted(parts[i + 1:]), CHECKOUT_DIRS[parts[i].lower()]
        if STDLIB_DIR.fullmatch(parts[i]) and i > 0 and parts[i - 1] == "lib":
            return _dotted(parts[i + 1:]), LIBRARY
    return _dotted(parts[-1:]), None


def _owner(top: str) -> str:
    return top if top in FRAMEWORKS else LIBRARY


def _dotted(parts: list[str]) -> str | None:
    names = list(parts)
    if names and names[-1].endswith(".py"):
        names[-1] = names[-1][:-3]
    if names and names[-1] == "__init__":
        names.pop()
    if not names or not all(IDENTIFIER.fullmatch(n) for n in names):
        return None
    return ".".join(names)
