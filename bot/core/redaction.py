"""Secrets out of every line the bot writes: GitHub tokens, JWTs, PEM private keys, a URL's password, and the
configured secrets themselves (webhook secret, ops token, API keys). One filter, put on the root handler."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable

from bot.core.settings import Settings

MASK = "[redacted]"
# Tokens GitHub issues (ghs_, ghp_, gho_, ghu_, ghr_, github_pat_), JWTs, PEM keys, bearer credentials.
_SECRETS = re.compile(r"(gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}|eyJ[\w-]{8,}\.[\w-]+\.[\w-]+|"
                      r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)")
# scheme://user:PASSWORD@host: the password goes, the rest (which database) stays readable.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]*:)[^\s@'\"]+(?P<at>@)", re.IGNORECASE)
_SHORTEST = 6  # a configured secret shorter than this is not searched for (it would mask ordinary words)
_STANDARD = set(vars(logging.makeLogRecord({})))  # a record's own attributes; the rest are a call's `extra`


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known kind of secret, and each of `secrets`, replaced by [redacted]."""
    text = _URL_PASSWORD.sub(rf"\g<head>{MASK}\g<at>", _SECRETS.sub(MASK, text))
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def configured_secrets(settings: Settings) -> list[str]:
    """The secret values of the settings (longest first, so that one inside another is masked whole)."""
    values = [s.get_secret_value().strip() for s in (settings.webhook_secret, settings.ops_token,
                                                      settings.llm_api_key, settings.github_token) if s]
    return sorted({v for v in values if len(v) >= _SHORTEST}, key=len, reverse=True)


class RedactingFilter(logging.Filter):
    """Rewrites each record's message, arguments and extra fields with the secrets masked, before any
    formatter sees it (a handler's filter also runs on the records that other loggers propagate to it)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = list(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        record.msg, record.args = redact(message, self.secrets), None
        for key, value in list(vars(record).items()):
            if key not in _STANDARD:
                record.__dict__[key] = self._extra(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        return True

    def _extra(self, value: object) -> object:
        if isinstance(value, str):
            return redact(value, self.secrets)
        if isinstance(value, (dict, list, tuple)):  # masked through its JSON form, its shape kept
            text = json.dumps(value, default=str)
            masked = redact(text, self.secrets)
            return json.loads(masked) if masked != text else value
        return value


def install_redaction(settings: Settings | None = None, logger: logging.Logger | None = None) -> None:
    """Put one RedactingFilter (with the settings' secrets) on every handler of `logger` (the root)."""
    secrets = configured_secrets(settings) if settings is not None else []
    for handler in (logger or logging.getLogger()).handlers:
        handler.filters = [f for f in handler.filters if not isinstance(f, RedactingFilter)]
        handler.addFilter(RedactingFilter(secrets))
