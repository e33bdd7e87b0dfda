"""The App itself: a JWT buys installation tokens; its webhook deliveries listed and redelivered."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from github import Auth, Github, GithubIntegration

from bot.service.github.api_errors import github_errors
from bot.service.github.client import InstallationClient, client_options
from bot.service.github.credentials import AppCredentials

log = logging.getLogger(__name__)

TOKEN_MARGIN_S = 300.0  # renew an installation token five minutes before GitHub expires it
MAX_CACHED_INSTALLATIONS = 1024


class GitHubApp:
    """The App: a JWT buys installation tokens, cached until shortly before they expire."""

    def __init__(self, credentials: AppCredentials, write_interval_s: float = 1.0) -> None:
        self.api_url = credentials.api_url
        self.app_id = int(credentials.app_id)
        self._integration = GithubIntegration(auth=Auth.AppAuth(credentials.app_id, credentials.private_key),
                                              **client_options(credentials.api_url))
        self._write_interval_s = write_interval_s
        self._lock = threading.Lock()
        self._clients: dict[int, tuple[float, InstallationClient]] = {}
        self._last_write: dict[int, float] = {}
        self._reserve: Callable[[int, float], float] | None = None

    def pace_with(self, reserve: Callable[[int, float], float]) -> None:
        """Book writes with `reserve(installation, interval)` -> the time to write at (a booking in the shared
        database, so that every replica's writes to one installation are paced together)."""
        self._reserve = reserve

    def installation(self, installation_id: int) -> InstallationClient:
        """A client acting as one installation (a token is fetched only when none is cached)."""
        with self._lock:
            cached = self._clients.get(installation_id)
            if cached and cached[0] - TOKEN_MARGIN_S > time.time():
                return cached[1]
        with github_errors(f"installation {installation_id} token"):
            grant = self._integration.get_access_token(installation_id)
        client = InstallationClient(Github(auth=Auth.Token(grant.token), lazy=True,
                                           **client_options(self.api_url)),
                                    lambda: self._pace_write(installation_id), self.app_id)
        with self._lock:
            self._clients[installation_id] = (grant.expires_at.timestamp(), client)
            while len(self._clients) > MAX_CACHED_INSTALLATIONS:  # bounded: the oldest token goes first
                del self._clients[min(self._clients, key=lambda key: self._clients[key][0])]
        return client

    def _pace_write(self, installation_id: int) -> None:
        """At most one write per `write_interval_s` per installation (GitHub's guidance for bots)."""
        if self._write_interval_s <= 0:
            return
        if self._reserve is not None:
            wait = self._reserve(installation_id, self._write_interval_s) - time.time()
            if wait > 0:
                time.sleep(wait)
            return
        with self._lock:
            now = time.monotonic()
            due = self._last_write.get(installation_id, 0.0) + self._write_interval_s
            self._last_write[installation_id] = max(now, due)
            if len(self._last_write) > MAX_CACHED_INSTALLATIONS:  # bounded: forget bookings already past
                self._last_write = {k: v for k, v in self._last_write.items() if v > now}
        if due > now:
            time.sleep(due - now)


# --- the App's webhook deliveries (missed-delivery recovery) -----------------------------------------------


def hook_deliveries(app: GitHubApp, max_pages: int = 10) -> list[dict[str, Any]]:
    """The App's recent webhook deliveries, newest first (`GET /app/hook/deliveries`, as the App's JWT)."""
    requester = app._integration.requester
    url: str | None = "/app/hook/deliveries?per_page=100"
    found: list[dict[str, Any]] = []
    for _ in range(max_pages):
        if url is None:
            break
        with github_errors("list the App's webhook deliveries"):
            headers, data = requester.requestJsonAndCheck("GET", url)
        found += [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []
        url = _next_link(headers.get("link", ""))
    return found


def redeliver(app: GitHubApp, delivery_id: int) -> None:
    """Ask GitHub to send one delivery again (`POST /app/hook/deliveries/{id}/attempts`)."""
    with github_errors(f"redeliver webhook delivery {delivery_id}"):
        app._integration.requester.requestJsonAndCheck("POST", f"/app/hook/deliveries/{delivery_id}/attempts")


def _next_link(link: str) -> str | None:
    for part in link.split(","):
        target, _, rel = part.partition(";")
        if 'rel="next"' in rel:
            return target.strip().strip("<>")
    return None
