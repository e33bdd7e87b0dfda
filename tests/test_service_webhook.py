"""The front door end to end: the real app, the real engine and worker, PyGithub against a fake GitHub."""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pytest

from bot.comment import has_marker
from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.queue.worker import Worker
from tests.fake_github import (
    COMMENTS,
    REPO,
    SECRET,
    WAIT_S,
    FakeGitHub,
    deliver,
    github_holding,
    issue_payload,
    load_payload,
    running_service,
    signed_delivery,
    state_of,
    wait_idle,
)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "symptom:hang_timeout"],
                        permissions={"bob-maintainer": "write", "alice-trainer": "read"}) as fake:
        yield fake


def opened(github: FakeGitHub, number: int = 42, **issue: Any) -> dict[str, Any]:
    return issue_payload(github, "issues-opened", number, **issue)


def test_signed_issue_opened_is_acknowledged_at_once_then_commented_once(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine, run_worker=False) as client, ThreadPoolExecutor(1) as pool:
        state = state_of(client)
        worker = Worker(state)
        # No worker runs yet: the answer comes all the same (the ack never waits for a triage), the job queued.
        answer = pool.submit(deliver, client, opened(github))
        # Failed below if it did not come: once the worker has let a waiting ack go, so that the service can stop.
        answered_before_any_triage = bool(wait([answer], timeout=60).done)
        queued, work = state.store.job_counts(), github.work_requests()
        worker.start()
        try:
            response = answer.result(timeout=WAIT_S)
            assert answered_before_any_triage, "the ack waited for the triage"
            assert response.status_code == 202 and response.json()["status"] == "queued"
            assert queued == {"queued": 1} and work == []
            assert wait_idle(client) == {"done": 1}
        finally:
            worker.stop(10.0)
    [comment] = github.comments_on(REPO, 42)
    body = comment["body"]
    assert comment["user"]["type"] == "Bot" and has_marker(body)
    assert "Automated suggestion by ddl-triage" in body and "not sure" not in body
    assert "github.com/" not in body.replace("redirect.github.com/", ""), "a link that pings another project"
    assert not [r for r in github.writes() if r.path.endswith("/labels")], "labels are off by default"


def test_redelivered_webhook_posts_no_second_comment(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    payload = opened(github)
    with running_service(app_settings, engine) as client:
        assert deliver(client, payload, delivery_id="d-1").status_code == 202
        wait_idle(client)
        again = deliver(client, payload, delivery_id="d-1")
        assert again.status_code == 200 and again.json()["status"] == "duplicate"
        assert wait_idle(client) == {"done": 1}
    assert len(github.comments_on(REPO, 42)) == 1
    assert len([r for r in github.writes() if r.path == COMMENTS]) == 1


def test_edited_issue_updates_the_same_comment(app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    payload = opened(github)
    with running_service(app_settings, engine) as client:
        deliver(client, payload)
        wait_idle(client)
        [first] = github.comments_on(REPO, 42)
        first_body = first["body"]
        edited = load_payload("issues-edited")
        # Without its NCCL log, and with one node said to work: the edited comment gives the multi-node step.
        edited["issue"]["body"] = re.sub(r"```.*?```", "No error is printed. A single node works fine.",
                                         payload["issue"]["body"], flags=re.S)
        github.add_issue(edited)
        assert deliver(client, edited).status_code == 202
        assert wait_idle(client) == {"done": 2}
    [comment] = github.comments_on(REPO, 42)
    assert comment["id"] == first["id"] and comment["body"] != first_body and "NCCL_DEBUG=INFO" in comment["body"]
    patches = [r for r in github.writes() if r.method == "PATCH"]
    assert [r.path for r in patches] == [f"/repos/{REPO}/issues/comments/{first['id']}"]


@pytest.mark.parametrize("secret", [None, "not-the-secret"], ids=["missing", "wrong"])
def test_bad_or_missing_signature_gets_401_and_no_work(
        app_settings: Settings, engine: Engine, github: FakeGitHub, secret: str | None) -> None:
    with running_service(app_settings, engine) as client:
        response = deliver(client, opened(github), secret=secret)
        assert response.status_code == 401
        body, headers = signed_delivery(opened(github), "issues", SECRET)
        tampered = client.post("/webhook", content=body.replace(b"Training", b"Tr4ining"), headers=headers)
        assert tampered.status_code == 401
        assert state_of(client).store.job_counts() == {}
    assert github.work_requests() == []


def test_bot_issue_and_pull_request_get_nothing(app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    by_bot = opened(github)
    by_bot["sender"] = by_bot["sender"] | {"login": "renovate[bot]", "type": "Bot"}
    pull = opened(github, number=43)
    pull["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/43",
                                     "html_url": f"https://github.com/{REPO}/pull/43", "merged_at": None}
    with running_service(app_settings, engine) as client:
        for payload in (by_bot, pull):
            response = deliver(client, payload)
            assert response.status_code == 202 and response.json()["status"] == "ignored"
        assert state_of(client).store.job_counts() == {}
    assert github.work_requests() == []


def test_ping_and_events_the_bot_does_not_handle_get_a_2xx_and_no_work(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        assert deliver(client, load_payload("ping"), event="ping").status_code == 200
        # `labeled` keeps the repository memory current now; `milestoned` is still nobody's business.
        milestoned = deliver(client, load_payload("issues-labeled") | {"action": "milestoned"})
        push = deliver(client, {"ref": "refs/heads/main", "commits": []}, event="push")
        assert (milestoned.status_code, milestoned.json()["status"]) == (202, "ignored")
        assert (push.status_code, push.json()["status"]) == (202, "ignored")
        assert state_of(client).store.job_counts() == {}
    assert github.work_requests() == []


def test_bad_deliveries_get_a_clear_4xx_and_the_ones_around_them_are_processed(
        app_settings: Settings, engine: Engine, github: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.service")
    first, last = opened(github, 42), opened(github, 43)
    missing = copy.deepcopy(first)
    del missing["issue"]["number"]
    with running_service(app_settings, engine) as client:
        assert deliver(client, first).status_code == 202
        malformed = deliver(client, b'{"action": "opened", "issue": ')
        assert malformed.status_code == 400 and "not JSON" in malformed.json()["error"]
        not_object = deliver(client, b'["opened"]')
        assert not_object.status_code == 400
        incomplete = deliver(client, missing)
        assert incomplete.status_code == 422 and "issue.number" in incomplete.json()["error"]
        assert deliver(client, {"zen": "x"}, event="marketplace_purchase").status_code == 202
        huge = deliver(client, b'{"pad": "' + b"x" * (10 * 1024 * 1024) + b'"}')
        assert huge.status_code == 413
        no_id = client.post("/webhook", content=b"{}", headers={"X-GitHub-Event": "issues",
                            "X-Hub-Signature-256": signed_delivery(b"{}", "issues", SECRET)[1]["X-Hub-Signature-256"]})
        assert no_id.status_code == 400
        assert deliver(client, last).status_code == 202
        assert wait_idle(client) == {"done": 2}
        assert client.get("/healthz").status_code == 200
    assert len(github.bot_comments(REPO, 42)) == 1 and len(github.bot_comments(REPO, 43)) == 1
    rejected = [r.getMessage() for r in caplog.records if r.getMessage().startswith("delivery rejected")]
    assert len(rejected) == 5 and any("413" in m for m in rejected) and any("issue.number" in m for m in rejected)
    assert any("marketplace_purchase" in r.getMessage() for r in caplog.records)


def test_the_bot_ignores_a_persons_comment_that_quotes_the_marker(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    payload = opened(github)
    github.add_comment(REPO, 42, "<!-- ddl-triage v1 copied by hand -->\nsame here!", login="carol")
    with running_service(app_settings, engine) as client:
        deliver(client, payload)
        wait_idle(client)
    assert len(github.bot_comments(REPO, 42)) == 1
    assert github.comments_on(REPO, 42)[0]["body"].endswith("same here!")


def test_another_apps_comment_that_quotes_the_marker_is_left_alone(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    payload = opened(github)
    other = github.add_comment(REPO, 42, "<!-- ddl-triage v1 quoted -->\nci report", login="other-ci[bot]",
                               kind="Bot", via_app=github.app_id + 1)
    with running_service(app_settings, engine) as client:
        deliver(client, payload)
        wait_idle(client)
    assert len(github.bot_comments(REPO, 42)) == 1
    assert github.comments[other]["body"].endswith("ci report")
    assert not any(r.method == "PATCH" for r in github.requests)


@pytest.mark.parametrize(("body", "reason"), [
    (b"[" * 100_000 + b"]" * 100_000, "nests"),
    (b'{"action": "opened", "n": ' + b"9" * 5000 + b"}", "not JSON"),
])
def test_signed_but_unparseable_bodies_are_400_with_a_reason(
        app_settings: Settings, engine: Engine, github: FakeGitHub, body: bytes, reason: str) -> None:
    with running_service(app_settings, engine, run_worker=False) as client:
        answer = deliver(client, body)
        assert answer.status_code == 400 and reason in answer.json()["error"]
        assert state_of(client).store.job_counts() == {}


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("title", "\ud800 broken", "issue.title"),
    ("body", "text \udfff", "issue.body"),
    ("number", 2**70, "issue.number"),
])
def test_signed_payloads_that_can_never_succeed_are_400_at_once(
        app_settings: Settings, engine: Engine, github: FakeGitHub, field: str, value: object, reason: str) -> None:
    payload = opened(github)
    payload["issue"][field] = value
    with running_service(app_settings, engine, run_worker=False) as client:
        answer = deliver(client, json.dumps(payload).encode())  # json escapes the lone surrogate as \\ud800
        assert answer.status_code == 400 and reason in answer.json()["error"]
        assert state_of(client).store.job_counts() == {}


def test_a_lone_surrogate_in_the_repository_name_is_400(app_settings: Settings, engine: Engine,
                                                        github: FakeGitHub) -> None:
    payload = opened(github)
    payload["repository"]["full_name"] = "example-org/\ud800"
    with running_service(app_settings, engine, run_worker=False) as client:
        answer = deliver(client, json.dumps(payload).encode())
        assert answer.status_code == 400 and "repository.full_name" in answer.json()["error"]


def test_made_up_event_names_do_not_grow_the_metrics(app_settings: Settings, engine: Engine,
                                                     github: FakeGitHub) -> None:
    with running_service(app_settings, engine, run_worker=False) as client:
        for i in range(200):
            body, headers = signed_delivery({"zen": "x"}, f"made-up-{i}", secret=None)
            assert client.post("/webhook", content=body, headers=headers).status_code == 401
        text = client.get("/metrics").text
    assert "made-up" not in text
    assert 'ddl_triage_deliveries_total{event="other",outcome="bad_signature"} 200.0' in text


def test_an_unsigned_body_is_refused_before_it_is_read_and_a_body_past_the_limit_as_it_streams(
        app_settings: Settings, engine: Engine) -> None:
    """The refusal reads no more than it needs: no chunk of an unsigned body, and a signed-looking body with
    no length declared only until it passes the limit (never the rest of it)."""
    import asyncio

    settings = app_settings.model_copy(update={"max_body_bytes": 1024 * 1024})
    chunk = b"x" * 65536  # 64 chunks: 4 MiB

    def post(signed: bool) -> tuple[int, int]:
        pulled = 0

        async def receive() -> dict[str, Any]:
            nonlocal pulled
            if pulled < 64:
                pulled += 1
                return {"type": "http.request", "body": chunk, "more_body": pulled < 64}
            return {"type": "http.disconnect"}

        statuses: list[int] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        headers = [(b"x-github-event", b"issues"), (b"x-github-delivery", b"big-1")]
        headers += [(b"x-hub-signature-256", b"sha256=" + b"0" * 64)] if signed else []
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/webhook", "raw_path": b"/webhook", "root_path": "", "query_string": b"",
                 "headers": headers, "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
        asyncio.run(client.app(scope, receive, send))  # type: ignore[arg-type]
        return statuses[0], pulled

    with running_service(settings, engine) as client:
        assert post(signed=False) == (401, 0)
        status, pulled = post(signed=True)
    assert status == 413 and pulled == 17, "read until it passed 1 MiB, not the 4 MiB sent"
