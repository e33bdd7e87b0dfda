"""The layout's promises: `bot/` shows the pipeline in a few packages, each importing only the ones before it
(core, reading, knowledge, models, comment, deciding, memory, service, cli); the memory and the storage import
nothing of the service; GitHub's JSON is read in `service/github/` only; no module is over 300 lines; and no
module imports another's private names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import bot

PACKAGE = Path(bot.__file__).parent
MAX_LINES = 300
MAX_TOP_ENTRIES = 10
# The pipeline a reader follows: a package may import itself and the packages before it, never one after it.
GITHUB_KEYS = ("full_name", "sender", "new_repository", "repositories_added", "repositories_removed", "html_url")
ORDER = ("core", "reading", "knowledge", "models", "comment", "deciding", "memory", "service", "cli")


def modules() -> dict[str, Path]:
    """Every module of bot/ by dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path) -> list[tuple[str, list[str], int, bool]]:
    """(imported module, names imported from it, line, under `if TYPE_CHECKING:`) for each import of a module,
    the ones inside functions included; relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            found.append((base, [a.name for a in node.names], node.lineno, id(node) in typing_only))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno, id(node) in typing_only) for a in node.names]
    return found


def stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "bot" and len(parts) > 1 else None


def test_the_top_level_of_bot_shows_the_pipeline_in_at_most_ten_entries() -> None:
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name not in ("__pycache__", "_shipped"))
    assert len(entries) <= MAX_TOP_ENTRIES, entries
    assert entries == sorted(["__init__.py", *ORDER]), "every top-level entry is a stage of the pipeline"


def test_each_package_imports_only_itself_and_the_packages_before_it() -> None:
    """Imports inside functions count; only `if TYPE_CHECKING:` imports (annotations, never run) are exempt."""
    found = modules()
    assert len(found) > 150
    late = []
    for name, path in found.items():
        own = stage(name)
        if name == "bot":
            continue
        assert own in ORDER, f"{name} is in no stage of the pipeline"
        for target, _, line, typing_only in imports(name, path):
            other = stage(target)
            if other is not None and not typing_only and ORDER.index(other) > ORDER.index(own):
                late.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({own}) imports {target} ({other})")
    assert late == []


def test_the_memory_and_the_storage_import_nothing_of_the_service() -> None:
    check = ("import importlib, pkgutil, sys, bot.memory, bot.core.storage\n"
             "for package in (bot.memory, bot.core.storage):\n"
             "    for found in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
             "        importlib.import_module(found.name)\n"
             "print(sorted(m for m in sys.modules if m.startswith('bot.service')))\n")
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_no_module_of_bot_is_over_300_lines() -> None:
    sizes = {path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert len(sizes) > 150
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}


def test_no_module_imports_a_private_name_of_another() -> None:
    private = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}.{alias}"
               for name, path in modules().items() for target, names, line, _ in imports(name, path)
               for alias in names if alias.startswith("_") and not alias.startswith("__") and target != name]
    assert private == []


def test_only_the_github_package_reads_githubs_json() -> None:
    """The keys only GitHub's JSON has (a repository's `full_name`, a delivery's `sender`, a transfer's
    `new_repository`, an installation's lists) appear in `bot/service/github/` only."""
    readers = sorted({path.relative_to(PACKAGE.parent).as_posix()
                      for path in PACKAGE.rglob("*.py") if "service/github/" not in path.as_posix()
                      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, ast.Constant) and node.value in GITHUB_KEYS})
    assert readers == []
