"""GitHub access through PyGithub against the fake: App tokens, comments by marker, labels, errors."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bot.service.errors import (
    NotFound,
    PayloadFieldError,
    PermanentGitHubError,
    RateLimited,
    TransientGitHubError,
)
from bot.service.github.api_errors import translate
from bot.service.github.client import InstallationClient
from bot.service.github.credentials import AppCredentials
from bot.service.github.github_app import GitHubApp
from bot.service.github.payloads import parse_event
from tests.fake_github import BOT_LOGIN, REPO, FakeGitHub, github_holding, issue_payload, load_payload

MARKED = "<!-- ddl-triage v1 taxonomy=ddl-v1 model=m predictor=default -->\nsuggestion"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "Symptom:Hang", "needs-info"],
                        permissions={"bob": "write", "dana": "admin", "eve": "read", "mo": "maintain",
                                     "tia": "triage"}) as fake:
        issue_payload(fake)
        yield fake


def app_for(github: FakeGitHub, app_id: int | None = None) -> GitHubApp:
    return GitHubApp(AppCredentials(app_id or github.app_id, github.private_key, github.base_url), 0.0)


@pytest.fixture
def client(github: FakeGitHub) -> InstallationClient:
    return app_for(github).installation(51000001)


def token_requests(github: FakeGitHub, installation: int) -> int:
    return len([r for r in github.requests if r.path == f"/app/installations/{installation}/access_tokens"])


def test_an_installation_token_is_bought_on_first_use_and_renewed_by_pygithub_before_it_expires(
        github: FakeGitHub) -> None:
    app = app_for(github)
    client = app.installation(1)
    assert app.installation(1) is client and token_requests(github, 1) == 0, "no token until a request needs one"
    client.read_issue(REPO, 42)
    client.read_issue(REPO, 42)
    assert token_requests(github, 1) == 1, "one token serves both reads"
    github.token_ttl_s = 10  # inside PyGithub's renewal margin: each request buys a fresh token
    short = app_for(github).installation(2)
    short.read_issue(REPO, 42)
    short.read_issue(REPO, 42)
    assert token_requests(github, 2) == 2


def test_a_jwt_of_another_app_is_refused(github: FakeGitHub) -> None:
    with pytest.raises(PermanentGitHubError, match="401"):
        app_for(github, app_id=1).installation(1).read_issue(REPO, 42)


def test_read_issue_and_a_missing_config_file(client: InstallationClient) -> None:
    snapshot = client.read_issue(REPO, 42)
    assert snapshot.issue.title.startswith("Training hangs") and snapshot.state == "open"
    assert not snapshot.is_pull_request and snapshot.issue.url == f"https://github.com/{REPO}/issues/42"
    assert client.read_file(REPO, ".github/ddl-triage.yml") is None


def test_read_config_file_through_the_contents_api(github: FakeGitHub, client: InstallationClient) -> None:
    github.repos[REPO].files[".github/ddl-triage.yml"] = "labels:\n  enabled: true\n"
    assert client.read_file(REPO, ".github/ddl-triage.yml") == "labels:\n  enabled: true\n"


def test_upsert_creates_once_then_edits_in_place_and_skips_an_unchanged_body(
        github: FakeGitHub, client: InstallationClient) -> None:
    github.add_comment(REPO, 42, MARKED + " quoted by a person", login="carol")
    created = client.upsert_comment(REPO, 42, MARKED)
    assert created.created
    same = client.upsert_comment(REPO, 42, MARKED)
    assert (same.id, same.created, same.changed) == (created.id, False, False)
    edited = client.upsert_comment(REPO, 42, MARKED + " v2")
    assert (edited.id, edited.changed) == (created.id, True)
    assert [c["body"] for c in github.bot_comments(REPO, 42)] == [MARKED + " v2"]
    assert [(r.method, r.path) for r in github.writes()] == [
        ("POST", f"/repos/{REPO}/issues/42/comments"), ("PATCH", f"/repos/{REPO}/issues/comments/{created.id}")]


def test_the_comment_is_found_by_its_stored_id_and_by_its_marker_once_that_id_is_gone(
        github: FakeGitHub, client: InstallationClient) -> None:
    """A comment just created may not be listed yet: read by its id, the edit never duplicates it."""
    created = client.upsert_comment(REPO, 42, MARKED)
    listings = f"/repos/{REPO}/issues/42/comments"
    hidden = github.comments.pop(created.id)  # the listing lags: the new comment is not in it yet
    github.comments[created.id] = hidden | {"_unlisted": True}
    before = [r for r in github.requests if r.method == "GET" and r.path == listings]
    edited = client.upsert_comment(REPO, 42, MARKED + " v2", known_id=created.id)
    assert (edited.id, edited.created, edited.changed) == (created.id, False, True)
    assert [r for r in github.requests if r.method == "GET" and r.path == listings] == before, "no listing"
    github.comments.pop(created.id)  # deleted by a maintainer: the stored id answers 404
    again = client.upsert_comment(REPO, 42, MARKED + " v3", known_id=created.id)
    assert again.created and again.id != created.id
    other = github.add_comment(REPO, 43, MARKED, login=BOT_LOGIN, kind="Bot", via_app=github.app_id)
    elsewhere = client.upsert_comment(REPO, 42, MARKED + " v3", known_id=other)  # an id of another issue
    assert (elsewhere.id, elsewhere.changed) == (again.id, False)


def test_labels_are_only_added_when_the_repository_has_them_and_never_removed(
        github: FakeGitHub, client: InstallationClient) -> None:
    issue = github.repos[REPO].issues[42]
    issue["labels"] = [{"name": "needs-info"}]
    added = client.add_labels(REPO, 42, ["symptom:hang", "kind:bug_report", "needs-info"], ["needs-info"])
    assert added == ["Symptom:Hang"]
    assert [label["name"] for label in issue["labels"]] == ["needs-info", "Symptom:Hang"]
    assert client.add_labels(REPO, 42, ["kind:bug_report"], ["needs-info"]) == []
    assert len(github.writes()) == 1


@pytest.mark.parametrize(("user", "role"), [("bob", "write"), ("dana", "admin"), ("eve", "read"), ("mo", "maintain"),
                                           ("tia", "triage"), ("mallory", None)])
def test_the_role_is_read_by_name_not_from_the_legacy_permission(
        github: FakeGitHub, client: InstallationClient, user: str, role: str | None) -> None:
    assert client.role_of(REPO, user) == role  # the fake answers maintain as "write" and triage as "read" too
    assert github.requests[-1].path == f"/repos/{REPO}/collaborators/{user}/permission"


def test_api_failures_become_retry_aware_errors() -> None:
    assert isinstance(translate(502, {}, {"message": "Server Error"}, "x"), TransientGitHubError)
    limited = translate(403, {"Retry-After": "7"}, {"message": "secondary rate limit"}, "x")
    assert isinstance(limited, RateLimited) and limited.retry_after == 7
    reset = translate(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 30)}, {}, "x")
    assert isinstance(reset, RateLimited) and 29 <= reset.retry_after <= 32
    assert isinstance(translate(429, {}, {}, "x"), RateLimited)
    forbidden = translate(403, {}, {"message": "Resource not accessible by integration"}, "x")
    assert isinstance(forbidden, PermanentGitHubError) and not isinstance(forbidden, RateLimited)
    assert isinstance(translate(404, {}, {"message": "Not Found"}, "x"), NotFound)


def test_payloads_parse_into_domain_events_and_a_missing_field_is_named() -> None:
    event = parse_event("issue_comment", load_payload("issue-comment-created"))
    assert (event.repo, event.number, event.installation_id) == (REPO, 42, 51000001)
    assert event.comment is not None and event.comment.body == "/triage" and event.comment.author == "bob-maintainer"
    assert not event.sender_is_bot and not event.is_pull_request
    broken = load_payload("issues-opened")
    broken["repository"] = {"name": "fastdist"}
    with pytest.raises(PayloadFieldError, match=r"repository\.full_name"):
        parse_event("issues", broken)
    broken = load_payload("issues-opened")
    broken["issue"]["number"] = "42"
    with pytest.raises(PayloadFieldError, match=r"issue\.number"):
        parse_event("issues", broken)
