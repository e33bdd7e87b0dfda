"""Shadow mode, decided here and nowhere else: the bot decides and stores its decisions (`/decisions`) but
writes nothing to GitHub.

The service is in shadow mode when asked (`--shadow`, `DDL_TRIAGE_SHADOW`) or when it has no GitHub identity to
post as; a repository is when the service is or its `.github/ddl-triage.yml` says `shadow: true`. Shadow mode
never weakens verification while the App could act: an unsigned delivery is accepted only in shadow mode with
no webhook secret and no App credential configured at all (then nothing can act on GitHub's behalf).
"""

from __future__ import annotations

from bot.repo_config import RepoConfig
from bot.settings import Settings


def service_shadow(settings: Settings, *, can_post: bool) -> bool:
    """Whether this process posts nothing: shadow mode asked for, or no client to post with."""
    return settings.shadow or not can_post


def repository_shadow(service: bool, config: RepoConfig) -> bool:
    """Whether nothing is posted on this repository: the service's shadow mode, or the repository's own."""
    return service or config.shadow


def credentials_required(settings: Settings) -> bool:
    """Outside shadow mode the App's secret, id and private key must all be set."""
    return not settings.shadow


def has_app_credentials(settings: Settings) -> bool:
    """Whether any App credential (id or private key) is configured: a client that could act is possible."""
    key = settings.github_private_key
    return settings.github_app_id is not None or bool(key and key.get_secret_value())


def has_webhook_secret(settings: Settings) -> bool:
    secret = settings.webhook_secret
    return bool(secret and secret.get_secret_value())


def unsigned_deliveries_allowed(settings: Settings) -> bool:
    """Only a shadow service with neither a webhook secret nor any App credential takes unsigned deliveries."""
    return settings.shadow and not has_webhook_secret(settings) and not has_app_credentials(settings)
