"""Shared fixtures: the real gold data read in place, and one real engine per test session."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.engine import Engine, build_engine
from bot.paths import default_data_dir
from bot.settings import Settings
from bot.taxonomy import Taxonomy, load_taxonomy
from tests.fake_github import FakeGitHub, app_settings_for, github_holding


@pytest.fixture(scope="session")
def gold_dir() -> Path:
    found = default_data_dir()
    if found is None:
        pytest.fail("the gold data is missing: tests read ../shared/data/gold next to the checkout")
    return found


@pytest.fixture(scope="session")
def session_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One state directory per session, so the case base is embedded and fitted once."""
    return tmp_path_factory.mktemp("state")


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
