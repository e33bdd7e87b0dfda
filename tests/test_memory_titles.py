"""The pack's neighbours get GitHub's title, type and state through the installation's client (real PyGithub
against the fake GitHub), cached with a TTL in the memory's tables; offline they stay as they were."""

from __future__ import annotations

from pathlib import Path

from bot.core.domain import EnvironmentFacts, Neighbour, TriageResult
from bot.memory.queries import with_titles
from bot.memory.store import MemoryStore
from bot.service.handlers.recall import ClientLookup
from tests.fake_github import FakeGitHub
from tests.memory_helpers import installation_client

PUBLIC = "bigcorp/trainer"


def result_with(*ids: str) -> TriageResult:
    return TriageResult(issue_id="x", predictions={}, environment=EnvironmentFacts(), predictor="knn",
                        taxonomy_version="ddl-v1", model_id="m",
                        neighbours=[Neighbour(id=i, url=None, score=0.9) for i in ids])


def test_neighbour_titles_and_states_come_from_github_once_per_ttl_and_stay_empty_offline(tmp_path: Path) -> None:
    with FakeGitHub().running() as github:
        github.add_repo(PUBLIC)
        github.put_issue(PUBLIC, {"number": 5, "title": "Fix the launcher", "state": "closed",
                                  "pull_request": {"url": "x", "merged_at": "2024-01-01T00:00:00Z"}})
        github.put_issue(PUBLIC, {"number": 6, "title": "Launcher hangs", "state": "open"})
        store = MemoryStore(f"sqlite:///{tmp_path / 'm.sqlite3'}")
        lookup = ClientLookup(installation_client(github))
        ids = (f"{PUBLIC}#5", f"{PUBLIC}#6", "gone/away#1")
        first = with_titles(result_with(*ids), store, lookup, ttl_s=3600)
        reads = len([r for r in github.requests if r.path.startswith("/repos/")])
        again = with_titles(result_with(*ids), store, lookup, ttl_s=3600)
        assert len([r for r in github.requests if r.path.startswith("/repos/")]) == reads, "cached"
        expired = with_titles(result_with(*ids[:1]), store, lookup, ttl_s=-1)
        offline = with_titles(result_with(*ids), store, None, ttl_s=3600)
        store.close()
    shown = [(n.title, n.type, n.state) for n in first.neighbours]
    assert shown == [("Fix the launcher", "pull_request", "closed"), ("Launcher hangs", "issue", "open"),
                     (None, None, None)]
    assert [(n.title, n.type, n.state) for n in again.neighbours] == shown
    assert expired.neighbours[0].title == "Fix the launcher"
    assert [(n.title, n.state) for n in offline.neighbours] == [(None, None)] * 3
