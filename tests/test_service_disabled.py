"""`enabled: false` in `.github/ddl-triage.yml`: the repository gets nothing stored and nothing synced, whatever
happens to its issues; its deliveries' stored payloads keep no text."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    github_holding,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
)
from tests.memory_helpers import installation_payload, listing_pages, rows_naming


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug"], config="enabled: false\n", permissions={"bob-maintainer": "write"}) as fake:
        fake.seed_issues(REPO, 8, seed=6)
        yield fake


def test_a_repository_that_turns_the_bot_off_gets_nothing_stored_and_nothing_synced(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, private_engine) as client:
        deliver(client, installation_payload("created", [REPO]), "installation")
        opened = issue_payload(github)
        deliver(client, opened)
        labeled = copy.deepcopy(opened) | {"action": "labeled"}
        labeled["issue"]["labels"] = [{"name": "bug"}]
        deliver(client, labeled)
        closed = copy.deepcopy(opened) | {"action": "closed"}
        closed["issue"] |= {"state": "closed", "state_reason": "completed"}
        deliver(client, closed)
        deliver(client, command(github, "/triage symptom=out_of_memory"), "issue_comment")
        assert set(wait_idle(client)) == {"done"}
        state = state_of(client)
        assert state.memory.store.repos() == [] and state.memory.store.cursor(REPO) is None
        assert state.store.decisions(repo=REPO) == [] and state.store.feedback_cases() == []

    assert listing_pages(github, REPO) == [], "nothing synced"
    assert github.bot_comments(REPO, 42) == [] and github.writes() == []
    texts = [str(i["title"]) for i in github.repos[REPO].issues.values()]
    assert rows_naming(app_settings.sqlite_url, [*texts, opened["issue"]["body"].splitlines()[0]]) == []
    # What names the repository is the queue's bookkeeping: the installation's delivery, which issue a job was for.
    assert {table for table, _ in rows_naming(app_settings.sqlite_url, [REPO])} <= {"jobs", "deliveries"}


def command(github: FakeGitHub, body: str) -> dict[str, Any]:
    payload = issue_payload(github, "issue-comment-created")
    payload["comment"]["body"] = body
    return payload
