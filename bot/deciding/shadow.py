"""Shadow mode, decided here and nowhere else: the bot decides and stores its decisions (`/decisions`) but
writes nothing to GitHub.

The service is in shadow mode when asked (`--shadow`, `DDL_TRIAGE_SHADOW`) or when it has no GitHub identity to
post as; a repository is when the service is or its `.github/ddl-triage.yml` says `shadow: true`. Shadow mode
never weakens verification while the App could act: an unsigned delivery is accepted only in shadow mode with
no webhook secret and no App credential configured at all (then nothing can act on GitHub's behalf), and never
on an interface beyond loopback while an LLM is configured (`check_exposure`): anyone who reached the port would
spend its credit.
"""

from __future__ import annotations

import ipaddress

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.deciding.repo_config import RepoConfig


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


def check_exposure(settings: Settings, host: str) -> None:
    """A ConfigError when `serve` would take unsigned deliveries on a non-loopback `host` with an LLM configured
    (DDL_TRIAGE_LLM or an LLM API key): every forged delivery would spend the LLM's credit and fill the disk.
    Without an LLM, shadow mode on the payloads alone may listen anywhere (the Docker try-out), with a warning."""
    llm = settings.llm or (settings.llm_api_key and settings.llm_api_key.get_secret_value())
    if llm and unsigned_deliveries_allowed(settings) and not is_loopback(host):
        raise ConfigError(f"DDL_TRIAGE_WEBHOOK_SECRET is not set, an LLM is configured and `serve` would listen on "
                          f"{host}: anyone who reaches the port could spend the LLM's credit with unsigned "
                          "deliveries; set DDL_TRIAGE_WEBHOOK_SECRET (and sign what you send, `ddl-triage replay` "
                          "does), or listen on 127.0.0.1")


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or "localhost") is a loopback interface; a name or 0.0.0.0 is not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
