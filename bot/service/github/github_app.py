"""The App itself: its JWT (PyGithub's `AppAuth`), a client per installation whose token PyGithub's
`AppInstallationAuth` fetches on first use and refreshes before it expires; its webhook deliveries listed
and redelivered."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from github import Auth, Github, GithubIntegration

from bot.service.github.api_errors import github_errors
from bot.service.github.client import InstallationClient, InstallationPause, client_options
from bot.service.github.credentials import AppCredentials

MAX_CACHED_INSTALLATIONS = 1024


class GitHubApp:
    """The App: one client per installation, kept for the process's life (least recently used past a bound)."""

    def __init__(self, credentials: AppCredentials, write_interval_s: float = 1.0) -> None:
        self.api_url = credentials.api_url
        self.app_id = int(credentials.app_id)
        self._auth = Auth.AppAuth(credentials.app_id, credentials.private_key)
        self._integration = GithubIntegration(auth=self._auth, **client_options(credentials.api_url))
        self._write_interval_s = write_interval_s
        self._lock = threading.Lock()
        self._clients: OrderedDict[int, InstallationClient] = OrderedDict()
        self._last_write: dict[int, float] = {}
        self._pace: Callable[[int, float], None] | None = None
        self._pauses: Callable[[int], InstallationPause] | None = None

    def pace_with(self, pace: Callable[[int, float], None]) -> None:
        """Pace writes with `pace(installation, interval)`, which returns when the write may go or raises to
        defer the job (a booking in the shared database, so every replica's writes to one installation are
        paced together; see `github/pacing.py`)."""
        self._pace = pace

    def pause_with(self, pauses: Callable[[int], InstallationPause]) -> None:
        """Share each installation's rate-limit pause through `pauses(installation)` (the shared database), so
        a limit one caller meets holds every caller of that installation, in every process."""
        self._pauses = pauses

    def installation(self, installation_id: int) -> InstallationClient:
        """A client acting as one installation. Nothing is asked of GitHub here: the token is bought on the
        client's first request (so an uninstalled installation's job never asks for one it cannot get)."""
        with self._lock:
            client = self._clients.get(installation_id)
            if client is None:
                auth = self._auth.get_installation_auth(installation_id)
                client = InstallationClient(Github(auth=auth, lazy=True, **client_options(self.api_url)),
                                            lambda: self._pace_write(installation_id), self.app_id,
                                            self._pauses(installation_id) if self._pauses else None)
                self._clients[installation_id] = client
                if len(self._clients) > MAX_CACHED_INSTALLATIONS:
                    self._clients.popitem(last=False)
            self._clients.move_to_end(installation_id)
            return client

    def renew(self, installation_id: int) -> InstallationClient:
        """A new client for the installation, whose first request buys a fresh token (after a 401: the
        cached one was revoked, or expired early by the clock)."""
        with self._lock:
            self._clients.pop(installation_id, None)
        return self.installation(installation_id)

    def _pace_write(self, installation_id: int) -> None:
        """At most one write per `write_interval_s` per installation (GitHub's guidance for bots)."""
        if self._write_interval_s <= 0:
            return
        if self._pace is not None:
            self._pace(installation_id, self._write_interval_s)
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
