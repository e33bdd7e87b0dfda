"""`ddl-triage history sync` and `ddl-triage backtest` as a user runs them, against the fake GitHub; and the
per-repository label model on vectors whose labels follow (or ignore) the text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bot.core.settings import Settings
from bot.memory.labels import LabelModel
from bot.memory.store import MemoryIssue, MemoryStore
from bot.models.engine import Engine
from bot.service.queue.store import Store
from bot.service.review.records import latest_backtest
from tests.fake_github import REPO, FakeGitHub, github_holding
from tests.memory_helpers import listing_pages

TOKEN = "ghp_cli_test_token"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "question"]) as fake:
        fake.seed_issues(REPO, 220, seed=3)
        fake.tokens[TOKEN] = 0
        yield fake


def run_cli(settings: Settings, github: FakeGitHub, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DDL_TRIAGE_STATE_DIR": str(settings.state_dir), "DDL_TRIAGE_GITHUB_TOKEN": TOKEN,
           "DDL_TRIAGE_GITHUB_API_URL": github.base_url, "DDL_TRIAGE_DATABASE_URL": f"sqlite:///{db}",
           "DDL_TRIAGE_MEMORY_PAGE_INTERVAL_S": "0"}
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_history_sync_resumes_after_a_limit_and_backtest_writes_its_report_without_api_calls(
        settings: Settings, engine: Engine, github: FakeGitHub, tmp_path: Path) -> None:
    db = tmp_path / "memory.sqlite3"
    first = run_cli(settings, github, db, "history", "sync", "--repo", REPO, "--limit", "150")
    assert first.returncode == 0, first.stderr
    assert "150 issues" in first.stdout and "run again to resume at page 2" in first.stdout
    second = run_cli(settings, github, db, "history", "sync", "--repo", REPO)
    assert second.returncode == 0, second.stderr
    assert f"{REPO}: 220 issues in the memory" in second.stdout
    store = MemoryStore(f"sqlite:///{db}")
    assert store.count(REPO) == 220
    store.close()
    assert listing_pages(github, REPO) == [1, 2, 2, 3]

    calls = len(github.requests)
    out = tmp_path / "report"
    done = run_cli(settings, github, db, "backtest", "--repo", REPO, "--last", "60", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert len(github.requests) == calls, "the backtest reads only the synced memory"
    report = (out / "report.md").read_text()
    assert report.splitlines()[2] == "| What the App would have done | Result |"
    data = json.loads((out / "backtest.json").read_text())
    assert data["replayed"] == 60 and len(data["issues"]) == 60
    assert data["duplicates"] == sum(i["duplicate_of"] is not None for i in data["issues"])
    assert (out / "related.png").stat().st_size > 0
    service = Store(f"sqlite:///{db}")  # kept for the review page's summary too
    kept = latest_backtest(service, REPO)
    service.close()
    assert kept is not None and kept[1]["replayed"] == 60 and "issues" not in kept[1]


def test_history_sync_without_credentials_says_which_variables_to_set(
        settings: Settings, github: FakeGitHub, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDL_TRIAGE_GITHUB")}
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "history", "sync", "--repo", REPO],
                          capture_output=True, text=True, env=env | {"DDL_TRIAGE_STATE_DIR": str(tmp_path)},
                          timeout=120)
    assert done.returncode == 1
    assert "DDL_TRIAGE_GITHUB_TOKEN" in done.stderr and "Traceback" not in done.stderr


def clustered_history(n: int = 120, seed: int = 0) -> tuple[list[MemoryIssue], np.ndarray]:
    """Two topics of issues: "gpu-memory" on one, "launcher" on the other, "triaged" at random on any."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(2, 32))
    topic = rng.integers(0, 2, size=n)
    vectors = centres[topic] + 0.3 * rng.normal(size=(n, 32))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    issues = [MemoryIssue(repo=REPO, number=i + 1, title=f"issue {i}", created_at=float(i), text_hash=str(i),
                          labels=[["gpu-memory", "launcher"][t]] + (["triaged"] if rng.random() < 0.5 else []))
              for i, t in enumerate(topic)]
    return issues, vectors.astype(np.float32)


def test_the_label_model_suggests_labels_that_follow_the_text_and_abstains_on_the_rest() -> None:
    issues, vectors = clustered_history()
    model = LabelModel.fit(issues[:100], vectors[:100])
    assert set(model.thresholds) == {"gpu-memory", "launcher"}, "a label at random never reaches 80% precision"
    right = [issue.labels[0] in [n for n, _ in model.suggest(v)] for issue, v in zip(issues[100:], vectors[100:],
                                                                                     strict=True)]
    assert np.mean(right) >= 0.9
    few = LabelModel.fit(issues[:4], vectors[:4])
    assert few.thresholds == {} and few.suggest(vectors[0]) == [], "too few examples: the model abstains"
