"""What makes a results file self-describing: code revision, package versions, data and taxonomy hashes."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import yaml

from bot.core.paths import shipped_dir
from bot.knowledge.taxonomy import taxonomy_path
from eval.data import file_sha256

CHECKOUT = Path(__file__).resolve().parent.parent
PACKAGES = ("ddl-triage", "numpy", "scikit-learn", "scipy", "torch", "sentence-transformers", "transformers",
            "pydantic", "matplotlib", "openai")


def git_revision(root: Path = CHECKOUT) -> dict[str, object]:
    """HEAD's SHA and whether tracked files differ from it (None when not a git checkout)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "--no-optional-locks", *args], cwd=root, capture_output=True,
                                  text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if sha else None
    return {"sha": sha, "dirty": None if status is None else bool(status)}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def taxonomy_record(name: str, version: str) -> dict[str, object]:
    path = taxonomy_path(name)
    return {"name": name, "version": version, "file": path.name, "sha256": file_sha256(path)}


def prompt_versions() -> dict[str, dict[str, object]]:
    """Every shipped prompt template: its declared version and the hash of its file."""
    found: dict[str, dict[str, object]] = {}
    for path in sorted(shipped_dir("prompts").glob("*.yaml")):
        try:
            version = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("version")
        except (OSError, yaml.YAMLError, AttributeError):
            version = None
        found[path.stem] = {"version": version, "sha256": file_sha256(path)}
    return found


def machine() -> dict[str, object]:
    return {"platform": platform.platform(), "cpus": os.cpu_count()}
