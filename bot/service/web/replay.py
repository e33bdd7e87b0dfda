"""`ddl-triage replay`: sign a saved delivery and send it to a running service, as GitHub would."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from bot.errors import DataError, TriageError
from bot.service.github.credentials import webhook_secret
from bot.service.web.signature import sign_body
from bot.settings import Settings

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
