"""The App's secrets, checked once at start-up; every problem names the variable that fixes it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.deciding.shadow import credentials_required, unsigned_deliveries_allowed

log = logging.getLogger(__name__)

PEM_START = "-----BEGIN"
REQUIRED = ("DDL_TRIAGE_WEBHOOK_SECRET", "DDL_TRIAGE_GITHUB_APP_ID", "DDL_TRIAGE_GITHUB_PRIVATE_KEY")


@dataclass(frozen=True)
class AppCredentials:
    """What authenticating as the GitHub App takes."""

    app_id: int
    private_key: str
    api_url: str


def check_credentials(settings: Settings) -> AppCredentials | None:
    """The App credentials, or None in shadow mode without them; outside shadow mode a gap is an error, and
    in shadow mode App credentials without the webhook secret are one (a forged delivery could act as the App)."""
    missing = missing_variables(settings)
    if missing and credentials_required(settings):
        raise ConfigError(f"{missing[0]} is not set; the service needs {', '.join(missing)} to act as a "
                          "GitHub App (or try it in shadow mode: `ddl-triage serve --shadow`)")
    if REQUIRED[0] in missing and not unsigned_deliveries_allowed(settings):
        raise ConfigError(f"{REQUIRED[0]} is not set but App credentials are ({', '.join(_configured(settings))}): "
                          "an unsigned delivery could make the App act; set the App's webhook secret, or unset "
                          "the App credentials to try shadow mode on the payloads alone")
    if REQUIRED[0] in missing:
        log.warning("shadow mode without DDL_TRIAGE_WEBHOOK_SECRET: deliveries are NOT verified; "
                    "do not expose this server beyond your machine")
    if settings.github_app_id is None or settings.github_private_key is None or REQUIRED[2] in missing:
        log.warning("shadow mode without App credentials: decisions come from the payloads alone")
        return None
    key = resolve_private_key(settings.github_private_key.get_secret_value())
    return AppCredentials(app_id=settings.github_app_id, private_key=key, api_url=settings.github_api_url)


def _configured(settings: Settings) -> list[str]:
    return [name for name in REQUIRED[1:] if name not in missing_variables(settings)]


def webhook_secret(settings: Settings) -> str | None:
    """The secret deliveries are signed with; None (no verification) only in shadow mode without credentials."""
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else ""
    return secret or None


def missing_variables(settings: Settings) -> list[str]:
    """The App variables that are unset or empty."""
    secret, key = settings.webhook_secret, settings.github_private_key
    values = (secret and secret.get_secret_value(), settings.github_app_id, key and key.get_secret_value())
    return [name for name, value in zip(REQUIRED, values, strict=True) if not value]


def resolve_private_key(value: str) -> str:
    """PEM text as given (literal `\\n` become newlines), or the content of the PEM file it names."""
    text = value.strip()
    if text.startswith(PEM_START):
        return text.replace("\\n", "\n") + "\n"
    path = Path(text).expanduser()
    try:
        content = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"DDL_TRIAGE_GITHUB_PRIVATE_KEY is neither PEM text nor a readable file "
                          f"({path}: {exc.strerror})") from None
    if PEM_START not in content:
        raise ConfigError(f"DDL_TRIAGE_GITHUB_PRIVATE_KEY names {path}, which holds no PEM private key")
    return content
