"""The memory in the running service, against the fake GitHub: installed repositories are synced, the issue
lifecycle keeps them current, a near-copy of a closed issue is linked with how it ended, an open near-twin is
a possible duplicate (never closed or labelled), and one repository's memory never reaches another's."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from bot.core.settings import Settings
from bot.memory.queries import Memory
from bot.models.engine import Engine
from tests.fake_github import (
    REPO,
    SUBJECTS,
    FakeGitHub,
    deliver,
    github_holding,
    issue_payload,
    load_payload,
    running_service,
    state_of,
    wait_idle,
)
from tests.memory_helpers import installation_payload

OTHER = "example-org/private-other"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "question", "nccl"]) as fake:
        fake.add_repo(OTHER, labels=["bug"])
        fake.seed_issues(REPO, 30, seed=1)
        fake.seed_issues(OTHER, 30, start=1, seed=2)
        opened = load_payload("issues-opened")["issue"]
        # Issue 42 (the payload) is a near-copy of closed issue 31 and of open issue 32 of the same repository.
        for number, state in ((31, "closed"), (32, "open")):
            twin = {"number": number, "title": opened["title"], "body": opened["body"] + "\nSame here.",
                    "state": "open", "state_reason": None, "labels": [{"name": "nccl"}],
                    "created_at": "2024-04-01T00:00:00Z", "updated_at": "2024-04-01T00:00:00Z",
                    "closed_at": None}
            fake.put_issue(REPO, twin)
            if state == "closed":
                fake.close_issue(REPO, twin, "completed", fixed_by=4290)
        yield fake


def memory_of(client: Any) -> Memory:
    memory = state_of(client).memory
    assert memory is not None
    return memory


def issue_event(github: FakeGitHub, action: str, number: int, repo: str = REPO, **issue: Any) -> dict[str, Any]:
    payload = copy.deepcopy(load_payload("issues-opened"))
    payload["action"] = action
    payload["repository"]["full_name"] = repo
    payload["issue"].update(number=number, **issue)
    return payload


@contextmanager
def installed_on_both(app_settings: Settings, engine: Engine) -> Iterator[TestClient]:
    """The service, installed on REPO and OTHER, with both histories synced."""
    settings = app_settings.model_copy(update={"memory_page_interval_s": 0.0})
    with running_service(settings, engine) as client:
        deliver(client, installation_payload("created", [REPO, OTHER]), "installation")
        wait_idle(client, timeout=120)
        yield client


def test_installed_repositories_link_near_copies_with_how_they_ended_and_never_across_repositories(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with installed_on_both(app_settings, engine) as client:
        memory = memory_of(client)
        assert memory.store.count(REPO) == 32 and memory.store.count(OTHER) == 30

        deliver(client, issue_payload(github))  # issue 42 of REPO
        wait_idle(client)
        decision = state_of(client).store.decisions(repo=REPO)[0]
        related = {r["number"]: r for r in decision.related}
        assert set(related) >= {31, 32} and 42 not in related
        assert related[31]["state"] == "closed" and related[31]["state_reason"] == "completed"
        assert related[31]["closed_by"] == "#4290" and related[31]["possible_duplicate"] is False
        assert related[32]["state"] == "open" and related[32]["possible_duplicate"] is True
        assert all(r["repo"] == REPO for r in decision.related)
        [posted] = github.bot_comments(REPO, 42)
        assert posted["body"] == decision.comment
        assert "**Seen before:**" in posted["body"]
        line_31 = next(line for line in posted["body"].splitlines() if "#31" in line)
        line_32 = next(line for line in posted["body"].splitlines() if "#32" in line)
        assert "fixed by #4290" in line_31 and "possible duplicate" not in line_31
        assert "open" in line_32 and "possible duplicate" in line_32

        # The same text opened in the other repository: nothing of REPO's memory appears there.
        other = issue_event(github, "opened", 42, repo=OTHER)
        github.add_issue(other)
        deliver(client, other)
        wait_idle(client)
        elsewhere = state_of(client).store.decisions(repo=OTHER)[0]
        assert all(r["repo"] == OTHER for r in elsewhere.related)
        assert REPO not in elsewhere.comment and "#31" not in elsewhere.comment
        assert REPO not in str(elsewhere.related)

    issue_42 = github.repos[REPO].issues[42]
    assert [label["name"] for label in issue_42["labels"]] == [], "the bot never labels a duplicate"
    assert issue_42.get("state", "open") == "open", "the bot never closes an issue"


def test_the_issue_lifecycle_keeps_the_memory_current_and_uninstalling_forgets_the_repository(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with installed_on_both(app_settings, engine) as client:
        memory = memory_of(client)

        opened = issue_payload(github)
        deliver(client, opened)
        wait_idle(client)
        assert memory.store.issue(REPO, 42) is not None

        deliver(client, issue_event(github, "labeled", 42, labels=[{"name": "bug"}, {"name": "nccl"}]))
        closed = issue_event(github, "closed", 32, state="closed", state_reason="not_planned",
                             closed_at="2024-06-01T00:00:00Z", title="renamed when closed")
        deliver(client, closed)
        deliver(client, issue_event(github, "deleted", 5))
        wait_idle(client)
        assert memory.store.issue(REPO, 42).labels == ["bug", "nccl"]  # type: ignore[union-attr]
        was_open = memory.store.issue(REPO, 32)
        assert was_open is not None and (was_open.state, was_open.state_reason) == ("closed", "not_planned")
        assert was_open.title == "renamed when closed"
        assert memory.store.issue(REPO, 5) is None

        moved = issue_event(github, "transferred", 6)
        moved["changes"] = {"new_repository": {"full_name": OTHER},
                            "new_issue": dict(moved["issue"], number=31)}
        deliver(client, moved)
        wait_idle(client)
        assert memory.store.issue(REPO, 6) is None and memory.store.issue(OTHER, 31) is not None

        deliver(client, installation_payload("removed", [REPO], event="installation_repositories"),
                "installation_repositories")
        wait_idle(client)
        assert memory.store.count(REPO) == 0 and memory.store.cursor(REPO) is None
        assert memory.store.count(OTHER) == 31, "the other repository keeps its memory"
        assert REPO not in memory.index.loaded_repos()


def test_a_delivery_older_than_the_stored_state_never_overwrites_it(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    """A `labeled` delivery retried after the issue was closed (its payload from before the close) must not
    reopen the issue in the memory nor drop what closed it; a fresher delivery still applies."""
    with installed_on_both(app_settings, engine) as client:
        memory = memory_of(client)
        synced = memory.store.issue(REPO, 31)
        assert synced is not None and (synced.state, synced.closed_by) == ("closed", "#4290")
        stale = issue_event(github, "labeled", 31, state="open", state_reason=None, closed_at=None,
                            labels=[{"name": "bug"}], updated_at="2024-03-01T00:00:00Z")
        deliver(client, stale)
        wait_idle(client)
        kept = memory.store.issue(REPO, 31)
        assert kept is not None and (kept.state, kept.closed_by, kept.labels) == ("closed", "#4290", ["nccl"])
        fresher = issue_event(github, "labeled", 31, state="closed", state_reason="completed",
                              closed_at="2024-04-01T00:00:00Z", labels=[{"name": "bug"}],
                              updated_at="2024-07-01T00:00:00Z")
        deliver(client, fresher)
        wait_idle(client)
        now = memory.store.issue(REPO, 31)
        assert now is not None and (now.state, now.closed_by, now.labels) == ("closed", "#4290", ["bug"])


def test_the_repositorys_own_labels_are_suggested_from_its_history_and_applied_only_when_enabled(
        app_settings: Settings, engine: Engine) -> None:
    import random

    from tests.fake_github import area_label, synthetic_issue

    areas = sorted({area_label(s) for s in SUBJECTS})
    with github_holding(labels=areas, config="labels:\n  enabled: true\n") as github:
        github.add_repo(OTHER, labels=areas)  # labels off (no config) in the other repository
        github.seed_issues(REPO, 240, seed=5, area_labels=True)
        github.seed_issues(OTHER, 240, seed=5, area_labels=True)
        settings = app_settings.model_copy(update={"github_api_url": github.base_url, "github_app_id": github.app_id,
                                                   "memory_page_interval_s": 0.0})
        title, body = synthetic_issue(random.Random(99))
        with running_service(settings, engine) as client:
            deliver(client, installation_payload("created", [REPO, OTHER]), "installation")
            wait_idle(client, timeout=180)
            for repo in (REPO, OTHER):
                payload = issue_event(github, "opened", 500, repo=repo, title=title, body=body, labels=[])
                github.add_issue(payload)
                deliver(client, payload)
            wait_idle(client)
            decision = state_of(client).store.decisions(repo=REPO)[0]
            assert [name for name, _ in decision.repo_labels][:1] == [area_label(title)]
            assert area_label(title) in decision.labels_added
            elsewhere = state_of(client).store.decisions(repo=OTHER)[0]
            assert elsewhere.labels_added == [] and elsewhere.repo_labels == decision.repo_labels
        applied = [label["name"] for label in github.repos[REPO].issues[500]["labels"]]
        assert applied == [area_label(title)]
        assert github.repos[OTHER].issues[500]["labels"] == []
