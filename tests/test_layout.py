"""The layout's promises: imports run one way (the service uses the memory and storage, never the reverse),
and the service, the memory and the storage keep their modules short."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bot

PACKAGE = Path(bot.__file__).parent
SHORT = ("service", "memory", "storage")  # the packages this layout owns
MAX_LINES = 300


def test_the_memory_and_the_storage_import_nothing_of_the_service() -> None:
    check = ("import importlib, pkgutil, sys, bot.memory, bot.core.storage\n"
             "for package in (bot.memory, bot.core.storage):\n"
             "    for found in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
             "        importlib.import_module(found.name)\n"
             "print(sorted(m for m in sys.modules if m.startswith('bot.service')))\n")
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_no_module_of_the_service_the_memory_or_the_storage_is_over_300_lines() -> None:
    sizes = {path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for name in SHORT for path in (PACKAGE / name).rglob("*.py")}
    assert len(sizes) > 30
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}
