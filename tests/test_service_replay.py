"""`ddl-triage replay`, and the README's try-out: `serve --shadow`, `replay` a sample, read `/decisions`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.core.errors import DataError, TriageError
from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.web.replay import replay_delivery
from bot.service.web.signature import verify_signature

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "issue-opened.json"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def recording_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append({"headers": dict(self.headers), "body": body})
            self.send_response(202)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/webhook", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_replay_sends_the_saved_bytes_signed_with_the_secret(settings: Settings) -> None:
    signing = settings.model_copy(update={"webhook_secret": SecretStr("replay-secret")})
    with recording_server() as (url, seen):
        status, _ = replay_delivery(signing, SAMPLE, url, "issues", "delivery-1")
    assert status == 202
    [request] = seen
    assert request["body"] == SAMPLE.read_bytes()
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["x-github-event"] == "issues" and headers["x-github-delivery"] == "delivery-1"
    assert verify_signature("replay-secret", request["body"], headers["x-hub-signature-256"])


def test_replay_explains_what_is_wrong(settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read"):
        replay_delivery(settings, tmp_path / "missing.json", "http://127.0.0.1:9/webhook", "issues", None)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="not a JSON webhook payload"):
        replay_delivery(settings, tmp_path / "bad.json", "http://127.0.0.1:9/webhook", "issues", None)
    with pytest.raises(TriageError, match="is `ddl-triage serve` running"):
        replay_delivery(settings, SAMPLE, f"http://127.0.0.1:{_free_port()}/webhook", "issues", None)


def _command() -> list[str]:
    script = Path(sys.executable).parent / "ddl-triage"
    return [str(script)] if script.exists() else [shutil.which("ddl-triage") or "ddl-triage"]


def test_readme_try_out_serve_in_shadow_mode_replay_a_sample_and_see_the_decision(
        settings: Settings, engine: Engine, tmp_path: Path) -> None:
    """The README's commands, as a user runs them (the session's embedding cache keeps it quick)."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDL_TRIAGE_")} | {
        "DDL_TRIAGE_STATE_DIR": str(settings.state_dir), "DDL_TRIAGE_DATA_DIR": str(settings.data_dir),
        "DDL_TRIAGE_DATABASE_URL": f"sqlite:///{tmp_path / 'try-out.sqlite3'}", "HF_HUB_OFFLINE": "1",
        # A worker at the default niceness 19 can starve for minutes behind other jobs on a shared test machine.
        "DDL_TRIAGE_WORKER_NICENESS": "0"}
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([*_command(), "serve", "--shadow", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while not _healthy(base):
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "the server did not become ready"
            time.sleep(0.25)
        replay = subprocess.run([*_command(), "replay", "examples/issue-opened.json", "--url", f"{base}/webhook"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert replay.returncode == 0 and replay.stderr.startswith("202"), replay.stdout + replay.stderr
        while not httpx.get(f"{base}/decisions").json()["decisions"]:
            assert time.monotonic() < deadline, "no decision appeared"
            time.sleep(0.1)
        [decision] = httpx.get(f"{base}/decisions").json()["decisions"]
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
        log.close()
    assert (decision["repo"], decision["number"], decision["posted"]) == ("example-org/fastdist", 7, False)
    # `replay` waited for that decision and printed its comment as markdown, not as a string inside JSON.
    assert decision["comment"] and decision["comment"].rstrip() in replay.stdout and "\\n" not in replay.stdout
    lines = (tmp_path / "serve.log").read_text().splitlines()
    structured = [json.loads(line) for line in lines if line.startswith("{")]
    assert any("deliveries are NOT verified" in line["msg"] for line in structured)
    assert any(line.get("msg", "").startswith("job done") and line.get("delivery") for line in structured)
    assert server.returncode == 0


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_replay_finds_the_decisions_beside_the_webhook_and_renders_one_for_a_person() -> None:
    from bot.service.web.replay import decisions_url, render_decision

    assert decisions_url("http://127.0.0.1:8000/webhook") == "http://127.0.0.1:8000/decisions"
    assert decisions_url("https://bot.example/prefix/webhook/") == "https://bot.example/prefix/decisions"
    assert decisions_url("https://bot.example") == "https://bot.example/decisions"
    shown = render_decision({"repo": "o/r", "number": 3, "outcome": "stored (shadow mode)", "labels_added": ["bug"],
                             "predictions": {"kind": {"label": "bug_report", "confidence": 0.91},
                                             "stage": {"label": None, "confidence": 0.3}},
                             "comment": "**Likely:** hang or timeout.\n"})
    assert shown == ("## o/r#3: stored (shadow mode)\nlabels shown: kind: bug_report (0.91); added: bug\n\n"
                     "**Likely:** hang or timeout.")
    silent = render_decision({"repo": "o/r", "number": 4, "outcome": "silent: nothing to add", "predictions": {},
                              "comment": None}, heading=False)
    assert silent == "labels shown: none\n\n(no comment: the bot stays silent)"
