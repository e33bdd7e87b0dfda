"""constraints.txt pins everything ddl-triage installs, and the image installs from it before any code arrives."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def pins() -> dict[str, Version]:
    found: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            found[canonicalize_name(requirement.name)] = Version(spec.version)
    return found


def dependency_closure(roots: list[Requirement]) -> set[str]:
    """The installed distributions that `roots` pull in, extras and environment markers applied."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = list(roots)
    while todo:
        requirement = todo.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        # A dependency's marker may name an extra: it counts when that extra of this package was asked for.
        extras = requirement.extras or {""}
        for line in metadata.requires(key[0]) or []:
            child = Requirement(line)
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in extras):
                todo.append(child)
    return {name for name, _ in seen}


def test_every_package_the_tests_run_on_is_pinned_at_the_version_installed() -> None:
    roots = [Requirement(r) for r in [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["dev"]]]
    closure = dependency_closure([r for r in roots if r.marker is None or r.marker.evaluate()])
    pinned = pins()
    assert {"torch", "sentence-transformers", "fastapi", "numpy", "pytest"} <= closure
    assert not closure - set(pinned), "unpinned: run .ci/freeze-constraints"
    for name in closure:
        installed = Version(metadata.version(name))
        # torch's build tag (+cpu) is the index's choice, not the pin's: 2.13.0 covers both builds.
        assert Version(installed.public) == pinned[name], f"{name}: installed {installed}, pinned {pinned[name]}"
    for requirement in roots:
        assert requirement.specifier.contains(pinned[canonicalize_name(requirement.name)], prereleases=True)


def test_the_image_installs_its_dependencies_before_it_copies_any_code() -> None:
    steps = [line.split(maxsplit=1) for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
             if re.match(r"^(COPY|RUN|FROM) ", line)]
    copies = [(i, args) for i, (op, args) in enumerate(steps) if op == "COPY"]
    first_copy, first_args = copies[0]
    assert first_args.split()[:-1] == ["pyproject.toml", "constraints.txt"]
    install = steps[first_copy + 1]
    assert install[0] == "RUN" and "-c constraints.txt" in install[1]
    assert any(args.startswith("bot ") for _, args in copies[1:])  # the code comes after, in layers of its own
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu$",
                     (ROOT / "Dockerfile").read_text(encoding="utf-8"), re.MULTILINE)
