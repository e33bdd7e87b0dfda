"""Where shipped data (taxonomy, prompts) and default directories live, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path

import platformdirs

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # bot/, the package (this module is bot/core/paths.py)
CHECKOUT_DIR = PACKAGE_DIR.parent


def shipped_dir(name: str) -> Path:
    """The `taxonomy/` or `prompts/` folder: inside the wheel when installed, else the checkout's."""
    installed = PACKAGE_DIR / "_shipped" / name
    return installed if installed.is_dir() else CHECKOUT_DIR / name


def default_data_dir() -> Path | None:
    """`../shared/data/gold` next to the project, when it exists (the researchers' default in `eval/`)."""
    for base in (Path.cwd(), CHECKOUT_DIR):
        candidate = (base / ".." / "shared" / "data" / "gold").resolve()
        if candidate.is_dir():
            return candidate
    return None


def default_state_dir() -> Path:
    """One place whatever the working directory: the per-user cache directory (`/data/state` in Docker)."""
    return Path(platformdirs.user_cache_dir("ddl-triage", appauthor=False))
