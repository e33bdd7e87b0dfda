"""Operations and repository config: health, metrics, logs, shadow mode and /decisions, labels."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.logs import DeliveryFilter, JsonFormatter
from tests.fake_github import (
    REPO,
    SECRET,
    FakeGitHub,
    deliver,
    github_holding,
    issue_payload,
    running_service,
    wait_idle,
    wait_until,
)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "kind:bug_report", "symptom:hang_timeout", "triaged-by-hand"]) as fake:
        yield fake


def test_health_is_ready_only_once_the_case_base_is_loaded_and_intake_works_meanwhile(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine=None) as client:
        loading = client.get("/healthz")
        assert loading.status_code == 503 and loading.json()["status"] == "loading"
        assert deliver(client, issue_payload(github)).status_code == 202
        wait_until(lambda: client.get("/healthz").status_code == 200, timeout=180)
        assert client.get("/healthz").json()["cases"] == len(engine.index)
        assert wait_idle(client) == {"done": 1}
    assert len(github.bot_comments(REPO, 42)) == 1


def test_health_reports_a_case_base_that_cannot_load(app_settings: Settings, tmp_path: Path) -> None:
    broken = app_settings.model_copy(update={"data_dir": tmp_path / "nowhere", "taxonomy": "no-such-taxonomy"})
    with running_service(broken, engine=None) as client:
        wait_until(lambda: client.get("/healthz").json()["status"] == "error")
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["engine"] == "failed" and "error" not in health.json()
        details = client.get("/healthz/details")  # the error text only behind the ops token
        assert details.status_code == 503 and "taxonomy" in details.json()["error"]


def test_metrics_count_deliveries_jobs_failures_and_latency(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    github.fail("POST", f"/repos/{REPO}/issues/42/comments", (502, {}))
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github))
        deliver(client, b"not json")
        wait_idle(client)
        response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'ddl_triage_deliveries_total{event="issues",outcome="queued"} 1.0' in text
    assert 'ddl_triage_deliveries_total{event="issues",outcome="invalid"} 1.0' in text
    assert 'ddl_triage_jobs_total{outcome="done"} 1.0' in text
    assert 'ddl_triage_jobs_total{outcome="retried"} 1.0' in text
    assert 'ddl_triage_job_failures_total{reason="transient"} 1.0' in text
    assert "ddl_triage_delivery_to_done_seconds_count 1.0" in text and "ddl_triage_triage_seconds_bucket" in text
    assert 'ddl_triage_jobs_by_status{status="done"} 1.0' in text and "ddl_triage_ready 1.0" in text


def test_shadow_mode_without_credentials_stores_decisions_and_writes_nothing(
        settings: Settings, engine: Engine, tmp_path: Path) -> None:
    shadow = settings.model_copy(update={"shadow": True, "worker_poll_s": 0.02,
                                         "database_url": SecretStr(f"sqlite:///{tmp_path / 's.sqlite3'}")})
    with FakeGitHub().running() as github:  # only to make the payload; the service never calls it
        github.add_repo(REPO)
        payload = issue_payload(github)
    with running_service(shadow, engine) as client:
        assert deliver(client, payload, secret=None).status_code == 202
        assert wait_idle(client) == {"done": 1}
        decisions = client.get("/decisions").json()
    assert decisions["shadow"] is True
    [decision] = decisions["decisions"]
    assert (decision["repo"], decision["number"], decision["posted"], decision["shadow"]) == (REPO, 42, False, True)
    assert set(decision["predictions"]) == {"kind", "stage", "symptom", "root_cause", "fix_pattern"}
    assert "<!-- ddl-triage v1" in decision["comment"] and decision["neighbours"]
    assert github.requests == []


def test_a_shadow_service_with_a_secret_still_checks_signatures(settings: Settings, engine: Engine,
                                                               tmp_path: Path) -> None:
    shadow = settings.model_copy(update={"shadow": True, "webhook_secret": SecretStr(SECRET),
                                         "database_url": SecretStr(f"sqlite:///{tmp_path / 's.sqlite3'}")})
    with FakeGitHub().running() as github, running_service(shadow, engine) as client:
        github.add_repo(REPO)
        assert deliver(client, issue_payload(github), secret=None).status_code == 401


def test_a_repository_in_shadow_mode_is_read_but_not_written(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    github.repos[REPO].files[".github/ddl-triage.yml"] = "shadow: true\n"
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github))
        assert wait_idle(client) == {"done": 1}
        [decision] = client.get("/decisions").json()["decisions"]
    assert decision["shadow"] and not decision["posted"]
    assert github.writes() == [] and any(r.path.endswith("/contents/.github/ddl-triage.yml") for r in github.requests)


def test_labels_when_enabled_are_only_added_if_they_exist_and_a_persons_label_stays(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    github.repos[REPO].files[".github/ddl-triage.yml"] = (
        "labels:\n  enabled: true\n  axes: [kind, symptom, root_cause]\n  names: {kind: {bug_report: bug}}\n")
    payload = issue_payload(github, labels=[{"name": "triaged-by-hand"}])
    with running_service(app_settings, engine) as client:
        deliver(client, payload)
        assert wait_idle(client) == {"done": 1}
        [decision] = client.get("/decisions").json()["decisions"]
    issue_labels = [label["name"] for label in github.repos[REPO].issues[42]["labels"]]
    shown = {axis: decision["predictions"][axis]["label"] for axis in ("kind", "symptom", "root_cause")}
    # The hang report is clear enough that kind and symptom are shown: the labels the check is about.
    assert (shown["kind"], shown["symptom"]) == ("bug_report", "hang_timeout"), shown
    # kind is renamed to the repository's `bug` (never `kind:bug_report`, which exists too); a root cause, when
    # shown, maps to a label the repository lacks and is not created.
    assert decision["labels_added"] == ["bug", "symptom:hang_timeout"]
    assert issue_labels == ["triaged-by-hand", "bug", "symptom:hang_timeout"]  # the person's label stays first
    assert not [r for r in github.writes() if r.path == f"/repos/{REPO}/labels"], "no label is created"


def test_a_repository_can_switch_the_bot_off(app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    github.repos[REPO].files[".github/ddl-triage.yml"] = "enabled: false\n"
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github))
        assert wait_idle(client) == {"done": 1}
    assert github.writes() == []


def test_a_missing_secret_fails_at_start_up_naming_the_variable(app_settings: Settings, engine: Engine) -> None:
    with pytest.raises(ConfigError, match="DDL_TRIAGE_WEBHOOK_SECRET"), \
            running_service(app_settings.model_copy(update={"webhook_secret": None}), engine):
        pass


def test_logs_carry_the_delivery_id_and_never_a_secret(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(DeliveryFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.DEBUG)
    try:
        with running_service(app_settings, engine) as client:
            deliver(client, issue_payload(github), delivery_id="delivery-abc")
            deliver(client, issue_payload(github), delivery_id="delivery-bad", secret="wrong")
            wait_idle(client)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    ours = [line for line in lines if line["logger"].startswith("bot.service")]
    assert any(line.get("delivery") == "delivery-abc" and "job done" in line["msg"] for line in ours)
    assert any(line.get("delivery") == "delivery-bad" and "rejected" in line["msg"] for line in ours)
    text = stream.getvalue()
    secrets = [SECRET, *github.tokens, github.private_key.splitlines()[1]]
    assert not [s for s in secrets if s in text]


def test_ops_pages_need_the_bearer_token(app_settings: Settings, engine: Engine) -> None:
    with running_service(app_settings, engine) as client:
        for path in ("/metrics", "/decisions", "/healthz/details", "/openapi.json", "/docs", "/redoc"):
            assert client.get(path).status_code == 200, path
            refused = client.get(path, headers={"Authorization": "Bearer wrong"})
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer", path
        assert client.get("/healthz/live").status_code == 200
        assert client.get("/healthz/ready", headers={"Authorization": ""}).status_code == 200


def test_without_a_token_ops_pages_are_open_only_in_shadow_mode_on_loopback(
        app_settings: Settings, engine: Engine) -> None:
    no_token = app_settings.model_copy(update={"ops_token": None})
    with running_service(no_token, engine) as client:
        assert client.get("/decisions").status_code == 401, "not in shadow mode"
    shadow = no_token.model_copy(update={"shadow": True})
    with running_service(shadow, engine) as client:
        assert client.get("/decisions").status_code == 200
    with running_service(shadow, engine, client=("203.0.113.9", 40000)) as client:
        assert client.get("/decisions").status_code == 401, "not on loopback"


def test_an_empty_ops_token_is_no_token_and_a_bare_bearer_opens_nothing(
        app_settings: Settings, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDL_TRIAGE_OPS_TOKEN", "")
    assert Settings().ops_token is None, "an empty variable is no token"
    empty = app_settings.model_copy(update={"ops_token": SecretStr("")})  # however it got there
    with running_service(empty, engine) as client:
        for header in ("bearer", "Bearer ", "Bearer   ", ""):
            for path in ("/decisions", "/healthz/details", "/metrics"):
                assert client.get(path, headers={"Authorization": header}).status_code == 401, (header, path)


def test_ready_is_503_while_the_database_cannot_answer(app_settings: Settings, engine: Engine) -> None:
    import sqlite3

    settings = app_settings.model_copy(update={"ack_timeout_s": 0.3})
    with running_service(settings, engine) as client:
        assert client.get("/healthz/ready").status_code == 200
        path = settings.sqlite_url.removeprefix("sqlite:///")
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            answer = client.get("/healthz/ready")
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert answer.status_code == 503 and answer.json()["database"] == "unreachable"
        assert client.get("/healthz/live").status_code == 200
