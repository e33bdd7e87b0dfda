"""Routing a job to its handler by (event, action), bedevere-style: each concern owns its own Router.

Dispatch only: no I/O here (a handler reads what it needs, e.g. `config_file.load_repo_config`)."""

from __future__ import annotations

from collections.abc import Callable

from bot.service.github.models import WebhookEvent
from bot.service.handlers.context import JobContext

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
