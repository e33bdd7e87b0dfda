"""A repository's `.github/ddl-triage.yml` that cannot be read or does not validate: no comment, no label, no
stored text until it is fixed, and `/healthz/details` and the log name the error (which key, which line);
`enabled: false` wins over every other key, valid or not; a missing file still means the defaults. An issue
transferred into another installation's repository is read there as that installation."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from bot.core.settings import Settings
from bot.deciding.repo_config import CONFIG_PATH
from bot.memory.store import SyncCursor
from bot.models.engine import Engine
from bot.service.handlers.config_file import BLOCKED
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
from tests.memory_helpers import INSTALLATION, rows_naming

CONTENTS = f"/repos/{REPO}/contents/{CONFIG_PATH}"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "kind:bug_report", "symptom:hang_timeout"]) as fake:
        yield fake


def nothing_done(client: TestClient, github: FakeGitHub, payload: dict[str, Any]) -> None:
    """No comment, no label, no memory row, no decision, and no text of the issue in the database."""
    state = state_of(client)
    assert github.writes() == [] and github.bot_comments(REPO, 42) == []
    assert state.memory.store.repos() == [] and state.store.decisions(repo=REPO) == []
    assert rows_naming(state.store.url, [payload["issue"]["title"], payload["issue"]["body"].splitlines()[0]]) == []


@pytest.mark.parametrize(("config", "named"), [
    ("enabled: true\nshadw: true\n", "shadw: Extra inputs are not permitted (line 2)"),
    ("comment: always\ncomment_on_members: maybe\n", "comment_on_members: Input should be a valid boolean"),
    ("labels:\n  enabled: true\n  axes: [kind, mood]\n", "labels.axes: Value error, unknown axes ['mood']"),
    ("comment: always\naxes: [kind\n", "not valid YAML (line 3)"),
])
def test_an_invalid_config_gets_nothing_done_and_names_its_error_until_it_is_fixed(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub, caplog: pytest.LogCaptureFixture,
        config: str, named: str) -> None:
    github.repos[REPO].files[CONFIG_PATH] = config
    caplog.set_level(logging.WARNING, logger="bot.service")
    with running_service(app_settings, private_engine) as client:
        opened = issue_payload(github)
        deliver(client, opened)
        assert wait_idle(client) == {"done": 1}
        nothing_done(client, github, opened)
        [error] = client.get("/healthz/details").json()["config_errors"].values()
        assert named in error["error"], error
        assert any(named in r.getMessage() and REPO in r.getMessage() for r in caplog.records)
        assert "config_errors" not in client.get("/healthz").json(), "the open page names no repository"

        github.repos[REPO].files[CONFIG_PATH] = "comment: always\n"  # fixed
        deliver(client, issue_payload(github, "issues-edited"))
        assert wait_idle(client, timeout=120) == {"done": 2}  # the session's first triage may load the model
        assert len(github.bot_comments(REPO, 42)) == 1
        assert client.get("/healthz/details").json()["config_errors"] == {}


def test_a_config_the_app_may_not_read_gets_nothing_done(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    github.repos[REPO].files[CONFIG_PATH] = "comment: always\n"
    forbidden = (403, {}, "Resource not accessible by integration")
    github.fail("GET", CONTENTS, forbidden)
    with running_service(app_settings, private_engine) as client:
        opened = issue_payload(github)
        deliver(client, opened)
        assert wait_idle(client) == {"done": 1}
        nothing_done(client, github, opened)
        [error] = client.get("/healthz/details").json()["config_errors"].values()
        assert "cannot be read" in error["error"] and "403" in error["error"]


def test_a_config_read_that_fails_with_a_5xx_is_retried_and_nothing_is_done_meanwhile(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    github.repos[REPO].files[CONFIG_PATH] = "enabled: false\n"
    github.fail("GET", CONTENTS, (502, {}), (502, {}))
    with running_service(app_settings, private_engine) as client:
        deliver(client, issue_payload(github))
        assert wait_idle(client) == {"done": 1}
        assert github.writes() == [] and state_of(client).memory.store.repos() == []
    assert [r.path for r in github.requests if r.path == CONTENTS] == [CONTENTS] * 3


@pytest.mark.parametrize("config", [
    "enabled: false\nshadw: true\n",
    "shadow: maybe\nenabled: false\nlabels: {enabled: yes, colour: red}\n",
    "enabled: false\naxes: [kind\n",  # not even YAML: the line is read on its own
    "enabled: no   # for now\n",
])
def test_enabled_false_wins_over_any_other_key_valid_or_not(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub, config: str) -> None:
    github.repos[REPO].files[CONFIG_PATH] = config
    with running_service(app_settings, private_engine) as client:
        opened = issue_payload(github)
        deliver(client, opened)
        labeled = copy.deepcopy(opened) | {"action": "labeled"}
        deliver(client, labeled)
        assert set(wait_idle(client)) == {"done"}
        nothing_done(client, github, opened)
        assert client.get("/healthz/details").json()["config_errors"] == {}, "turned off, not misconfigured"


def test_a_missing_config_still_means_the_defaults(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, private_engine) as client:
        deliver(client, issue_payload(github))
        assert wait_idle(client) == {"done": 1}
        decision = state_of(client).store.decisions(repo=REPO)[0]
        assert decision.outcome != BLOCKED and state_of(client).memory.store.count(REPO) == 1


OTHER = "other-org/platform"  # a repository of another installation
OTHER_INSTALLATION = 88


def transfer(github: FakeGitHub) -> dict[str, Any]:
    payload = issue_payload(github)
    payload["action"] = "transferred"
    new_issue = copy.deepcopy(payload["issue"]) | {"number": 7, "html_url": f"https://github.com/{OTHER}/issues/7"}
    payload["changes"] = {"new_repository": {"full_name": OTHER, "name": "platform"}, "new_issue": new_issue}
    return payload


@pytest.mark.parametrize(("other_config", "remembered"), [
    ("enabled: false\n", False),  # read with the old installation's token it was a 404: the defaults
    ("comment: always\n", True),
])
def test_a_transferred_issue_is_read_in_its_new_repository_as_that_repositorys_installation(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub, other_config: str,
        remembered: bool) -> None:
    github.add_repo(OTHER, config=other_config)
    github.installations = {INSTALLATION: [REPO], OTHER_INSTALLATION: [OTHER]}
    with running_service(app_settings, private_engine) as client:
        memory = state_of(client).memory.store
        memory.save_cursor(SyncCursor(repo=OTHER, installation_id=OTHER_INSTALLATION, status="done"))
        deliver(client, transfer(github))
        assert wait_idle(client) == {"done": 1}
        assert (memory.issue(OTHER, 7) is not None) is remembered
        reads = [r for r in github.requests if r.path == f"/repos/{OTHER}/contents/{CONFIG_PATH}"]
        assert reads and {github.tokens[r.authorization.split()[1]] for r in reads} == {OTHER_INSTALLATION}


def test_a_transferred_issue_whose_new_config_cannot_be_read_is_not_remembered(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    github.add_repo(OTHER, config="comment: always\n")
    github.installations = {INSTALLATION: [REPO], OTHER_INSTALLATION: [OTHER]}
    github.fail("GET", f"/repos/{OTHER}/contents/{CONFIG_PATH}", (403, {}, "Resource not accessible by integration"))
    with running_service(app_settings, private_engine) as client:
        memory = state_of(client).memory.store
        memory.save_cursor(SyncCursor(repo=OTHER, installation_id=OTHER_INSTALLATION, status="done"))
        deliver(client, transfer(github))
        assert wait_idle(client) == {"done": 1}
        assert memory.issue(OTHER, 7) is None
        assert OTHER in client.get("/healthz/details").json()["config_errors"]


def test_a_transferred_issue_whose_new_installation_is_gone_is_not_remembered(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    github.add_repo(OTHER, config="enabled: false\n")
    github.installations = {INSTALLATION: [REPO]}
    with running_service(app_settings, private_engine) as client:
        memory = state_of(client).memory.store
        memory.save_cursor(SyncCursor(repo=OTHER, installation_id=OTHER_INSTALLATION, status="done"))
        github.fail("POST", f"/app/installations/{OTHER_INSTALLATION}/access_tokens", (404, {}, "Not Found"))
        deliver(client, transfer(github))
        assert wait_idle(client) == {"done": 1}
        assert memory.issue(OTHER, 7) is None, "no token for its installation: its config is unread, not defaults"
