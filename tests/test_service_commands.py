"""`/triage` comments: a re-run or corrections from someone whose role may triage; nobody else commands the bot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from bot.comment.links import issue_html_url
from bot.core.domain import Issue
from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.github.payloads import parse_event
from bot.service.handlers.commands import TriageCommand, may_command, parse_command
from bot.service.handlers.context import JobContext
from tests.fake_github import (
    REPO,
    FakeGitHub,
    app_settings_for,
    deliver,
    github_holding,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    roles = {f"user-{role}": role for role in ("admin", "maintain", "write", "triage", "read", "security-auditor")}
    with github_holding(permissions={"bob-maintainer": "write", "alice-trainer": "read"} | roles) as fake:
        yield fake


@pytest.fixture
def client(settings: Settings, private_engine: Engine, github: FakeGitHub, tmp_path: Path) -> Iterator[TestClient]:
    """A service whose issue #42 already carries the bot's comment (corrections change its own case base)."""
    with running_service(app_settings_for(settings, github, tmp_path), private_engine) as client:
        deliver(client, issue_payload(github))
        assert wait_idle(client) == {"done": 1}
        yield client


def command(github: FakeGitHub, body: str, author: str = "bob-maintainer", kind: str = "User") -> dict[str, Any]:
    payload = issue_payload(github, "issue-comment-created")
    payload["comment"]["body"] = body
    payload["comment"]["user"] = payload["comment"]["user"] | {"login": author, "type": kind}
    payload["sender"] = payload["sender"] | {"login": author, "type": kind}
    return payload


def test_parse_command_reads_the_first_triage_line() -> None:
    assert parse_command("thanks!") is None
    assert parse_command("> /triage quoted") is None
    assert parse_command("/triage") == TriageCommand()
    assert parse_command("Looks wrong.\n/triage symptom=hang_timeout Kind=bug_report\n") == TriageCommand(
        {"symptom": "hang_timeout", "kind": "bug_report"})
    assert parse_command("/triage please") == TriageCommand({}, ("please",))
    assert parse_command("/triaged") is None


def test_a_rerun_by_someone_with_write_access_keeps_one_comment(client: TestClient, github: FakeGitHub) -> None:
    [before] = github.bot_comments(REPO, 42)
    assert deliver(client, command(github, "/triage"), event="issue_comment").status_code == 202
    assert wait_idle(client) == {"done": 2}
    [after] = github.bot_comments(REPO, 42)
    assert after["id"] == before["id"]
    assert any(r.path.endswith("/collaborators/bob-maintainer/permission") for r in github.requests)


def test_a_correction_is_stored_as_a_labelled_case_and_shown_in_the_same_comment(
        client: TestClient, github: FakeGitHub) -> None:
    deliver(client, command(github, "/triage symptom=out_of_memory"), event="issue_comment")
    assert wait_idle(client) == {"done": 2}
    [case] = state_of(client).store.feedback_cases()
    assert (case["axis"], case["value"], case["author"]) == ("symptom", "out_of_memory", "bob-maintainer")
    assert case["title"].startswith("Training hangs")
    [comment] = github.bot_comments(REPO, 42)  # the labels stay in the hidden marker (no Likely line by default)
    assert "symptom:out_of_memory" in comment["body"].split("-->")[0]


def test_a_correction_joins_the_case_base_at_once(client: TestClient, github: FakeGitHub) -> None:
    deliver(client, command(github, "/triage symptom=out_of_memory stage=training"), event="issue_comment")
    assert wait_idle(client) == {"done": 2}
    engine = state_of(client).engine.engine
    assert engine is not None
    [learned] = [c for c in engine.index.cases if c.id == f"{REPO}#42"]
    assert learned.labels == {"symptom": "out_of_memory", "stage": "training"}
    assert learned.url is not None and learned.url.endswith(f"/{REPO}/issues/42")
    look_alike = Issue(id="other", repo=REPO, title=learned.title, body=learned.body)
    result = engine.triage(look_alike)
    assert result.neighbours[0].id == f"{REPO}#42"  # the corrected issue is now evidence for look-alikes
    elsewhere = engine.triage(look_alike.model_copy(update={"repo": "another-org/other"}))
    assert f"{REPO}#42" not in {n.id for n in elsewhere.neighbours}  # and only in its own repository


def test_someone_without_write_access_cannot_command_the_bot(client: TestClient, github: FakeGitHub) -> None:
    [before] = github.bot_comments(REPO, 42)
    writes = len(github.writes())
    deliver(client, command(github, "/triage symptom=out_of_memory", author="alice-trainer"), event="issue_comment")
    assert wait_idle(client) == {"done": 2}
    assert state_of(client).store.feedback_cases() == []
    assert github.bot_comments(REPO, 42) == [before] and len(github.writes()) == writes


@pytest.mark.parametrize(("role", "may"), [("admin", True), ("maintain", True), ("write", True), ("triage", True),
                                           ("read", False), ("security-auditor", False), (None, False)])
def test_each_role_that_may_triage_records_a_correction_and_no_other_does(
        client: TestClient, github: FakeGitHub, role: str | None, may: bool) -> None:
    author = f"user-{role}" if role else "a-stranger"  # a stranger: GitHub answers 404, no role
    deliver(client, command(github, "/triage symptom=out_of_memory", author=author), event="issue_comment")
    assert wait_idle(client) == {"done": 2}
    recorded = [(c["author"], c["value"]) for c in state_of(client).store.feedback_cases()]
    assert recorded == ([(author, "out_of_memory")] if may else [])
    [comment] = github.bot_comments(REPO, 42)
    assert ("symptom:out_of_memory" in comment["body"].split("-->")[0]) is may
    assert any(r.path.endswith(f"/collaborators/{author}/permission") for r in github.requests)


def test_an_invalid_correction_changes_nothing(client: TestClient, github: FakeGitHub) -> None:
    writes = len(github.writes())
    deliver(client, command(github, "/triage mood=grumpy symptom=not_a_symptom"), event="issue_comment")
    assert wait_idle(client) == {"done": 2}
    assert state_of(client).store.feedback_cases() == [] and len(github.writes()) == writes


def test_plain_comments_and_bot_comments_make_no_job(client: TestClient, github: FakeGitHub) -> None:
    plain = deliver(client, command(github, "Same problem here with 4 nodes."), event="issue_comment")
    by_bot = deliver(client, command(github, "/triage", author="other-bot[bot]", kind="Bot"), event="issue_comment")
    assert plain.json()["status"] == by_bot.json()["status"] == "ignored"
    assert state_of(client).store.job_counts() == {"done": 1}


def test_issue_web_addresses_follow_the_api_host() -> None:
    assert issue_html_url("https://api.github.com", "o/r", 7) == "https://github.com/o/r/issues/7"
    assert issue_html_url("https://ghe.example.com/api/v3/", "o/r", 7) == "https://ghe.example.com/o/r/issues/7"


def test_corrections_are_ignored_where_the_repository_disabled_the_bot(
        client: TestClient, github: FakeGitHub) -> None:
    github.repos[REPO].files[".github/ddl-triage.yml"] = "enabled: false\n"
    writes = len(github.writes())
    deliver(client, command(github, "/triage symptom=out_of_memory"), event="issue_comment")
    assert wait_idle(client) == {"done": 2}
    assert state_of(client).store.feedback_cases() == []
    assert len(github.writes()) == writes


@pytest.mark.parametrize(("association", "may"), [("OWNER", True), ("MEMBER", False), ("COLLABORATOR", False),
                                                  ("CONTRIBUTOR", False), ("NONE", False), (None, False)])
def test_without_api_access_only_the_owner_may_command_the_bot(github: FakeGitHub, association: str | None,
                                                               may: bool) -> None:
    """A read-only collaborator or organisation member is told apart only by the API: without it, fail closed."""
    payload = command(github, "/triage symptom=out_of_memory")
    payload["comment"]["author_association"] = association
    event = parse_event("issue_comment", payload)
    assert may_command(cast(JobContext, SimpleNamespace(client=None)), event) is may
