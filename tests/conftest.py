"""Shared fixtures: the real gold data read in place, and one real engine per test session."""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import bot.reading.normalise as normalise_module
from bot.core.paths import default_data_dir
from bot.core.settings import Settings
from bot.knowledge.taxonomy import Taxonomy, load_taxonomy
from bot.models.engine import Engine, build_engine
from tests.fake_github import FakeGitHub, app_settings_for, github_holding

CHECKOUT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def gold_dir() -> Path:
    found = default_data_dir()
    if found is None:
        pytest.fail("the gold data is missing: tests read ../shared/data/gold next to the checkout")
    return found


@pytest.fixture(scope="session")
def session_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One state directory per session, so the case base is embedded and fitted once.

    Its embedding cache and fitted models (both keyed by content) outlive the session in `.test-cache/` of the
    checkout (or DDL_TRIAGE_TEST_CACHE), so a rerun skips the minutes of embedding and fitting; everything else
    (databases, LLM answers) is new each session. DDL_TRIAGE_TEST_CACHE=off keeps it all fresh.
    """
    state = tmp_path_factory.mktemp("state")
    kept = os.environ.get("DDL_TRIAGE_TEST_CACHE", str(CHECKOUT / ".test-cache"))
    if kept != "off":
        kept_dir = Path(kept).resolve()
        (kept_dir / "fitted").mkdir(parents=True, exist_ok=True)
        (state / "cache").mkdir()
        (state / "cache" / "fitted").symlink_to(kept_dir / "fitted", target_is_directory=True)
        (state / "cache" / "embeddings.sqlite3").symlink_to(kept_dir / "embeddings.sqlite3")  # SQLite follows it
    return state


@pytest.fixture(scope="session")
def settings(gold_dir: Path, session_state: Path) -> Settings:
    return Settings(data_dir=gold_dir, state_dir=session_state)


@pytest.fixture(scope="session")
def taxonomy() -> Taxonomy:
    return load_taxonomy("ddl-v1")


@pytest.fixture(scope="session")
def engine(settings: Settings) -> Engine:
    """The real default engine on every gold file: real embeddings, real predictor, real calibration."""
    return build_engine(settings)


@pytest.fixture
def private_engine(engine: Engine) -> Engine:
    """The session engine with its own copy of the case base, for tests that add cases to it."""
    return dataclasses.replace(engine, training=copy.deepcopy(engine.training))


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """A running fake GitHub holding REPO with no labels or config (modules that need more define their own)."""
    with github_holding() as fake:
        yield fake


@pytest.fixture
def app_settings(settings: Settings, github: FakeGitHub, tmp_path: Path) -> Settings:
    """Settings of an App that the module's `github` fixture (a fake GitHub) knows, with a fresh database."""
    return app_settings_for(settings, github, tmp_path)


@pytest.fixture
def count_readings(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Counter[str]]:
    """`count_readings(title)` counts, per module of bot/ that calls `normalise`, the calls on issues with that
    title from then on (the test's own issue: the case base's readings are not counted)."""
    def start(title: str) -> Counter[str]:
        real = normalise_module.normalise
        calls: Counter[str] = Counter()

        def counting(where: str) -> Any:
            def normalise(issue: Any, *args: Any, **kwargs: Any) -> Any:
                if issue.title == title:
                    calls[where] += 1
                return real(issue, *args, **kwargs)
            return normalise

        for name, module in list(sys.modules.items()):
            if name.startswith("bot.") and getattr(module, "normalise", None) is real:
                monkeypatch.setattr(module, "normalise", counting(name))
        return calls
    return start
