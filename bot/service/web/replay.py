"""`ddl-triage replay`: sign a saved delivery and send it to a running service, as GitHub would, and read back the
decision it stored (`ddl-triage decisions`): the comment as markdown, not as a string inside JSON."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bot.core.errors import DataError, TriageError
from bot.core.settings import Settings
from bot.service.github.credentials import webhook_secret
from bot.service.web.signature import sign_body

USER_AGENT = "GitHub-Hookshot/ddl-triage-replay"


def replay_delivery(settings: Settings, payload_path: Path, url: str, event: str,
                    delivery_id: str | None) -> tuple[int, str]:
    """POST the file's bytes unchanged, signed with DDL_TRIAGE_WEBHOOK_SECRET when set; (status, body)."""
    try:
        body = payload_path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read the payload: {exc.strerror}", path=str(payload_path)) from None
    try:
        json.loads(body)
    except ValueError as exc:
        raise DataError(f"not a JSON webhook payload ({exc})", path=str(payload_path)) from None
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, "X-GitHub-Event": event,
               "X-GitHub-Delivery": delivery_id or str(uuid.uuid4())}
    secret = webhook_secret(settings)
    if secret:
        headers["X-Hub-Signature-256"] = sign_body(secret, body)
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=30.0)
    except httpx.HTTPError as exc:
        raise TriageError(f"cannot reach {url} ({type(exc).__name__}); is `ddl-triage serve` running there?"
                          ) from None
    return response.status_code, response.text


def decisions_url(url: str) -> str:
    """The service's `/decisions` beside a webhook URL (`http://host:8000/webhook` -> `http://host:8000/decisions`),
    or under a bare base URL."""
    base = url.rstrip("/")
    return (base.removesuffix("/webhook") if base.endswith("/webhook") else base) + "/decisions"


def fetch_decisions(settings: Settings, url: str, repo: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The latest decisions from a running service, newest first (with the ops token when one is set)."""
    headers = {"Authorization": f"Bearer {settings.ops_token.get_secret_value()}"} if settings.ops_token else {}
    params: dict[str, str | int] = {"limit": limit, **({"repo": repo} if repo else {})}
    target = decisions_url(url)
    try:
        response = httpx.get(target, params=params, headers=headers, timeout=30.0)
    except httpx.HTTPError as exc:
        raise TriageError(f"cannot reach {target} ({type(exc).__name__}); is `ddl-triage serve` running there?"
                          ) from None
    if response.status_code == 401:
        raise TriageError(f"{target} answered 401: set DDL_TRIAGE_OPS_TOKEN to the service's ops token (without "
                          "one, only a shadow-mode service answers, and only on loopback)")
    if response.status_code != 200:
        raise TriageError(f"{target} answered {response.status_code}: {response.text[:200]}")
    decisions: list[dict[str, Any]] = response.json()["decisions"]
    return decisions


def wait_for_decision(settings: Settings, url: str, delivery_id: str, wait_s: float,
                      poll_s: float = 0.25) -> dict[str, Any] | None:
    """The decision the service stored for `delivery_id`, polled until it appears or `wait_s` has passed."""
    deadline = time.monotonic() + wait_s
    while True:
        found = [d for d in fetch_decisions(settings, url, limit=50) if d.get("delivery_id") == delivery_id]
        if found:
            return found[0]
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll_s)


def render_decision(decision: dict[str, Any], heading: bool = True) -> str:
    """A decision for a person: which issue, what became of it, the labels shown, and the comment as markdown."""
    shown = [f"{axis}: {p['label']} ({p['confidence']:.2f})" for axis, p in decision.get("predictions", {}).items()
             if isinstance(p, dict) and p.get("label")]
    lines = [f"## {decision['repo']}#{decision['number']}: {decision.get('outcome') or 'decided'}"] if heading else []
    lines.append(f"labels shown: {', '.join(shown) or 'none'}"
                 + (f"; added: {', '.join(decision['labels_added'])}" if decision.get("labels_added") else ""))
    comment = decision.get("comment")
    lines += ["", comment.rstrip() if comment else "(no comment: the bot stays silent)"]
    return "\n".join(lines)
