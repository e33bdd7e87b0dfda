"""`ddl-triage action`: the GitHub Action form, for maintainers who will not host a service.

It reads the workflow's event (`GITHUB_EVENT_PATH`, `GITHUB_EVENT_NAME`) and runs it through the App's own
handlers (`handlers.dispatch.ROUTER`): the same marker, the same `.github/ddl-triage.yml`, the same rules (no mentions,
never closes, labels only added), authenticated with the workflow's `GITHUB_TOKEN` instead of an App.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from github import Auth, Github

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.deciding.shadow import credentials_required, service_shadow
from bot.service.github.client import InstallationClient, client_options
from bot.service.github.payloads import parse_event
from bot.service.handlers.context import JobContext
from bot.service.handlers.dispatch import ROUTER
from bot.service.state import Role, build_state

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"


@dataclass
class ActionContext(JobContext):
    """A job context whose GitHub identity is the workflow token: it posts unless shadow mode is asked for."""

    @property
    def shadow(self) -> bool:
        return service_shadow(self.state.settings, can_post=self.client is not None)


class Pacer:
    """At most one write per interval from this process (a workflow run is one process per issue)."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s, self._last, self._lock = interval_s, 0.0, threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            wait = self._last + self._interval_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last = time.monotonic()


def token_client(token: str, api_url: str, write_interval_s: float) -> InstallationClient:
    """GitHub as the workflow token. Its comments come from a bot of the Actions App, whose id we do not know."""
    return InstallationClient(Github(auth=Auth.Token(token), lazy=True, **client_options(api_url)),
                              Pacer(write_interval_s), app_id=None)


def read_event(env: Mapping[str, str]) -> tuple[str, dict[str, object]]:
    """The event name and payload of the workflow run; a missing or unreadable file names the variable."""
    path_text = env.get("GITHUB_EVENT_PATH")
    if not path_text:
        raise ConfigError("GITHUB_EVENT_PATH is not set: run `ddl-triage action` inside a GitHub Actions "
                          "workflow (on: issues / issue_comment), or set it to a saved event payload")
    path = Path(path_text)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"GITHUB_EVENT_PATH {path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"GITHUB_EVENT_PATH {path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(payload, dict):
        raise ConfigError(f"GITHUB_EVENT_PATH {path}: not a JSON object")
    name = env.get("GITHUB_EVENT_NAME") or ("issue_comment" if "comment" in payload else "issues")
    return name, payload


def run_action(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """Triage the workflow's issue event and upsert the one comment; returns the outcome."""
    env = os.environ if env is None else env
    name, payload = read_event(env)
    event = parse_event(name, payload)
    if event.sender_is_bot:
        return "ignored: sent by a bot"
    if not ROUTER.handles(event.event, event.action):
        return f"ignored: {event.event}.{event.action} is not triaged"
    token = env.get("GITHUB_TOKEN") or env.get("DDL_TRIAGE_GITHUB_TOKEN")
    if not token and credentials_required(settings):
        raise ConfigError("GITHUB_TOKEN is not set: pass `env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}` to the "
                          "step (permissions: issues: write), or use --shadow to only print the comment")
    api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
    client = token_client(token, api_url, settings.write_interval_s) if token else None
    # The workflow token is the client; the state is built as every process builds it (no App client).
    state = build_state(settings, Role.ACTION, github=lambda _settings: None)
    try:
        engine = state.engine.engine
        assert engine is not None  # an ACTION state is built with its engine loaded
        run = f"action-{env.get('GITHUB_RUN_ID', 'local')}-{env.get('GITHUB_RUN_ATTEMPT', '1')}"
        return ROUTER.dispatch(ActionContext(state=state, engine=engine, client=client, delivery_id=run,
                                             payload=payload), event)
    finally:
        state.close()
