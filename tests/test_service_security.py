"""Security: health pages that leak nothing, an ops token no path spelling gets past, no unsigned delivery while
the App could act, and no secret in any log line."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.routing import Mount

from bot.core.errors import ConfigError
from bot.core.redaction import RedactingFilter, redact
from bot.core.settings import Settings
from bot.deciding.shadow import check_exposure
from bot.memory.store import SyncCursor
from bot.models.engine import Engine
from bot.service.github.credentials import check_credentials
from bot.service.logs import configure_logging
from bot.service.state import open_store
from bot.service.web.app import create_app
from tests.fake_github import FAST, OPS_TOKEN, REPO, FakeGitHub, deliver, issue_payload, running_service, state_of

GUARDED = ("/metrics", "/decisions", "/healthz/details", "/openapi.json", "/docs", "/redoc")
TOKEN = {"Authorization": f"Bearer {OPS_TOKEN}"}
DB_PASSWORD = "s3cret-db-pass"


def test_health_pages_say_ok_and_counts_but_never_a_repository_or_an_error(
        app_settings: Settings, engine: Engine) -> None:
    with running_service(app_settings, engine, client=("203.0.113.9", 40000)) as client:
        state = state_of(client)
        state.memory.store.save_cursor(SyncCursor(repo=REPO, synced=7, status="done"))
        client.headers.pop("Authorization")
        health = client.get("/healthz")
        assert health.status_code == 200 and health.json()["memory"] == {"done": 1}
        assert REPO not in health.text and "example-org" not in health.text
        [(pages,)] = state.store.pragma("page_count")
        state.sqlite_pragma(f"max_page_count = {pages}")  # the database is full: SQLite's own error text
        for path in ("/healthz", "/healthz/ready"):
            refused = client.get(path)
            assert refused.status_code == 503 and refused.json()["database"] == "unreachable", path
            assert "error" not in refused.json() and "max_page_count" not in refused.text, path
        assert client.get("/healthz/details").status_code == 401
        details = client.get("/healthz/details", headers=TOKEN).json()
        assert "max_page_count" in details["error"] and details["database"] == "unreachable"
        state.sqlite_pragma("max_page_count = 1073741823")
        details = client.get("/healthz/details", headers=TOKEN).json()
        assert details["memory"] == {REPO: {"status": "done", "synced": 7, "page": 1}}


def test_a_root_path_or_a_mount_prefix_does_not_get_past_the_ops_token(
        app_settings: Settings, engine: Engine) -> None:
    # Behind a proxy that strips /triage (uvicorn --root-path), and mounted under /bot in another app.
    with TestClient(create_app(app_settings, engine=engine, options=FAST), root_path="/triage") as client:
        for path in GUARDED:
            assert client.get(f"/triage{path}").status_code == 401, path
            assert client.get(f"/triage{path}", headers=TOKEN).status_code == 200, path
        assert "'/triage/openapi.json'" in client.get("/triage/docs", headers=TOKEN).text
        assert client.get("/triage/healthz/live").status_code == 200
    inner = create_app(app_settings, engine=engine, options=FAST)
    outer = Starlette(routes=[Mount("/bot", app=inner)], lifespan=lambda _app: inner.router.lifespan_context(inner))
    with TestClient(outer) as client:
        for path in GUARDED:
            assert client.get(f"/bot{path}").status_code == 401, path
            assert client.get(f"/bot{path}", headers=TOKEN).status_code == 200, path
            assert client.get(f"/bot/{path}").status_code in (401, 404), path  # a doubled slash


def test_app_credentials_without_a_webhook_secret_refuse_to_start_even_in_shadow_mode(settings: Settings,
                                                                                      github: FakeGitHub) -> None:
    shadow = settings.model_copy(update={"shadow": True, "webhook_secret": None})
    for credential in ({"github_app_id": github.app_id},
                       {"github_private_key": SecretStr(github.private_key)},
                       {"github_app_id": github.app_id, "github_private_key": SecretStr(github.private_key)}):
        with pytest.raises(ConfigError, match="DDL_TRIAGE_WEBHOOK_SECRET is not set but App credentials are"):
            check_credentials(shadow.model_copy(update=credential))
    assert check_credentials(shadow) is None  # shadow mode on the payloads alone: allowed


def test_serve_with_app_credentials_and_no_secret_stops_with_one_line(
        settings: Settings, github: FakeGitHub, tmp_path: Path) -> None:
    run = serve(tmp_path, DDL_TRIAGE_GITHUB_APP_ID=str(github.app_id), DDL_TRIAGE_GITHUB_PRIVATE_KEY=github.private_key,
                DDL_TRIAGE_GITHUB_API_URL=github.base_url)
    [line] = [line for line in run.stderr.splitlines() if line.startswith("ddl-triage: error:")]
    assert run.returncode == 1 and "DDL_TRIAGE_WEBHOOK_SECRET is not set but App credentials are" in line
    assert github.requests == [], "no App client was made"


def test_an_unsigned_delivery_is_refused_while_the_process_holds_an_app_client(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    # Even if a process were handed a client by other means (here: the tests' factory), no secret means 401.
    shadow = app_settings.model_copy(update={"shadow": True, "webhook_secret": None, "github_app_id": None,
                                             "github_private_key": None})
    real = app_settings.model_copy(update={"shadow": True})
    from bot.service.state import connect_github

    app = create_app(shadow, engine=engine, github=lambda _s: connect_github(real), options=FAST)
    with TestClient(app) as client:
        assert deliver(client, issue_payload(github), secret=None).status_code == 401
    assert github.writes() == []


def test_a_start_up_never_logs_the_database_password(tmp_path: Path) -> None:
    run = serve(tmp_path, DDL_TRIAGE_DATABASE_URL=f"postgresql://triage:{DB_PASSWORD}@127.0.0.1:1/triage")
    assert run.returncode == 1 and "DDL_TRIAGE_DATABASE_URL" in run.stderr
    assert DB_PASSWORD not in run.stderr + run.stdout
    run = serve(tmp_path, DDL_TRIAGE_DATABASE_URL=f"mysql://triage:{DB_PASSWORD}@db.example/triage")
    assert run.returncode == 1 and "mysql://triage:[redacted]@db.example/triage" in run.stderr
    assert DB_PASSWORD not in run.stderr + run.stdout


def test_the_database_url_is_a_secret_and_the_service_still_connects_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDL_TRIAGE_DATABASE_URL", f"postgresql://triage:{DB_PASSWORD}@db.internal:5432/triage")
    settings = Settings()
    for shown in (repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())):
        assert DB_PASSWORD not in shown
    assert settings.sqlite_url == f"postgresql://triage:{DB_PASSWORD}@db.internal:5432/triage"
    monkeypatch.setenv("DDL_TRIAGE_DATABASE_URL", f"sqlite:///{tmp_path / 'service.sqlite3'}")
    store = open_store(Settings())
    try:
        store.ping()
    finally:
        store.close()
    assert (tmp_path / "service.sqlite3").exists()


def test_shadow_mode_with_an_llm_and_no_secret_refuses_to_listen_beyond_loopback(
        settings: Settings, tmp_path: Path) -> None:
    run = serve(tmp_path, DDL_TRIAGE_LLM="openai:some-model", DDL_TRIAGE_LLM_API_KEY="sk-test-llm-key-0000",
                host="0.0.0.0")
    [line] = [line for line in run.stderr.splitlines() if line.startswith("ddl-triage: error:")]
    assert run.returncode == 1 and "DDL_TRIAGE_WEBHOOK_SECRET is not set, an LLM is configured" in line
    assert "0.0.0.0" in line and "sk-test-llm-key-0000" not in run.stderr + run.stdout
    unsigned = settings.model_copy(update={"shadow": True, "llm_api_key": SecretStr("sk-test-llm-key-0000")})
    check_exposure(unsigned, "127.0.0.1")  # a try-out on this machine
    check_exposure(unsigned.model_copy(update={"llm_api_key": None}), "0.0.0.0")  # no LLM: the Docker try-out
    check_exposure(unsigned.model_copy(update={"webhook_secret": SecretStr("hook-secret-123")}), "0.0.0.0")
    for host in ("0.0.0.0", "::", "10.1.2.3", "triage.example.org"):
        with pytest.raises(ConfigError, match="DDL_TRIAGE_WEBHOOK_SECRET"):
            check_exposure(unsigned, host)


def test_the_root_handler_redacts_every_kind_of_secret_from_any_logger(settings: Settings) -> None:
    secrets = settings.model_copy(update={"webhook_secret": SecretStr("hook-secret-123"),
                                          "ops_token": SecretStr("ops-token-456"),
                                          "llm_api_key": SecretStr("sk-live-789xyz")})
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    stream = io.StringIO()
    try:
        configure_logging(logging.INFO, settings=secrets)
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        log = logging.getLogger("somewhere.else")
        log.info("connecting to %s", f"postgresql://user:{DB_PASSWORD}@host/db")
        log.warning("secret %s token %s key %s", "hook-secret-123", "ops-token-456", "sk-live-789xyz",
                    extra={"url": f"postgresql://u:{DB_PASSWORD}@h/d", "auth": "token ghs_abcdefgh12345678",
                           "headers": {"Authorization": "Bearer ops-token-456"}, "count": 3})
        try:
            raise RuntimeError(f"cannot reach postgresql://user:{DB_PASSWORD}@host/db")
        except RuntimeError:
            log.exception("failed")
    finally:
        root.handlers[:] = saved
        root.setLevel(level)
    text = stream.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["msg"] == "connecting to postgresql://user:[redacted]@host/db"
    assert len(lines) == 3 and "[redacted]" in lines[2]["error"]
    assert lines[1]["headers"] == {"Authorization": "Bearer [redacted]"} and lines[1]["count"] == 3
    for secret in (DB_PASSWORD, "hook-secret-123", "ops-token-456", "sk-live-789xyz", "ghs_abcdefgh12345678"):
        assert secret not in text, secret


def test_redaction_keeps_what_is_no_secret() -> None:
    assert redact("sqlite:///var/lib/ddl-triage.sqlite3") == "sqlite:///var/lib/ddl-triage.sqlite3"
    assert redact("postgresql://triage@db/triage and https://api.github.com/repos/a/b") == (
        "postgresql://triage@db/triage and https://api.github.com/repos/a/b")
    record = logging.makeLogRecord({"msg": "%d%% done of %s", "args": (50, "postgresql://a:b@c/d")})
    assert RedactingFilter().filter(record) and record.getMessage() == "50% done of postgresql://a:[redacted]@c/d"


def serve(tmp_path: Path, host: str = "127.0.0.1", **env: str) -> subprocess.CompletedProcess[str]:
    """`ddl-triage serve --shadow` as an operator starts it, with `env` added; expected to stop at start-up."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DDL_TRIAGE_")}
    base |= {"DDL_TRIAGE_STATE_DIR": str(tmp_path / "state"), "HF_HUB_OFFLINE": "1"} | env
    return subprocess.run([sys.executable, "-m", "bot.cli.main", "serve", "--shadow", "--host", host, "--port", "0",
                           "--workers", "0"], capture_output=True, text=True, env=base, timeout=120)
