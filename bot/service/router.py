"""Routing a job to its handler by (event, action), bedevere-style: each concern owns its own Router."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from bot.engine import Engine
from bot.service.errors import PermanentGitHubError
from bot.service.events import WebhookEvent
from bot.service.github import InstallationClient
from bot.service.repo_config import CONFIG_PATH, RepoConfig, parse_repo_config
from bot.service.state import ServiceState

log = logging.getLogger(__name__)


@dataclass
class JobContext:
    """What a handler may use: the engine, the store, GitHub as this installation (None: no credentials)."""

    state: ServiceState
    engine: Engine
    client: InstallationClient | None
    delivery_id: str

    @property
    def shadow(self) -> bool:
        return self.state.shadow

    def repo_config(self, repo: str) -> RepoConfig:
        """The repository's `.github/ddl-triage.yml` (the defaults without credentials or without a file)."""
        where = f"{repo}/{CONFIG_PATH}"
        try:
            text = self.client.read_file(repo, CONFIG_PATH) if self.client else None
        except PermanentGitHubError as exc:  # e.g. 403: the App's single-file permission names another path
            log.warning("%s cannot be read, using the defaults: %s", where, exc)
            text = None
        return parse_repo_config(text, self.engine.taxonomy, where)


Handler = Callable[[JobContext, WebhookEvent], str]


class Router:
    """Handlers by (event, action); a handler returns a short outcome for the logs and metrics."""

    def __init__(self, *routers: Router) -> None:
        self._routes: dict[tuple[str, str], Handler] = {}
        for router in routers:
            self._routes.update(router._routes)

    def register(self, event: str, *actions: str) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            for action in actions:
                self._routes[(event, action)] = handler
            return handler
        return decorate

    def handles(self, event: str, action: str) -> bool:
        return (event, action) in self._routes

    def dispatch(self, ctx: JobContext, event: WebhookEvent) -> str:
        return self._routes[(event.event, event.action)](ctx, event)
