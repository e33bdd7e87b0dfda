"""GitHub's failed answers translated into the service's retry-aware errors (rate limited, transient,
permanent, not found), with the wait GitHub asks for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import parsedate_to_datetime

import requests
from github import GithubException

from bot.service.errors import NotFound, PermanentGitHubError, RateLimited, TransientGitHubError

DEFAULT_RATE_LIMIT_WAIT_S = 60.0


@contextmanager
def github_errors(what: str) -> Iterator[None]:
    """Translate PyGithub's and requests' exceptions into the service's retry-aware errors."""
    try:
        yield
    except GithubException as exc:
        raise translate(exc.status, exc.headers or {}, exc.data, what) from None
    except requests.RequestException as exc:
        raise TransientGitHubError(f"{what}: network error ({type(exc).__name__})") from None


def translate(status: int, headers: dict[str, str], data: object, what: str) -> Exception:
    """The domain error for one failed API answer."""
    message = data.get("message", "") if isinstance(data, dict) else str(data or "")
    text = f"{what}: GitHub answered {status} {message}".rstrip()
    wait = rate_limit_wait(status, {k.lower(): v for k, v in headers.items()}, str(message))
    if wait is not None:
        return RateLimited(text, wait)
    if status >= 500:
        return TransientGitHubError(text)
    return NotFound(text, status) if status == 404 else PermanentGitHubError(text, status)


def rate_limit_wait(status: int, headers: dict[str, str], message: str) -> float | None:
    """Seconds GitHub asks us to wait, or None when the answer is not a rate limit."""
    if status not in (403, 429):
        return None
    if "retry-after" in headers:
        return _retry_after(headers["retry-after"])
    if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
        try:
            return max(0.0, float(headers["x-ratelimit-reset"]) - time.time()) + 1.0
        except ValueError:
            return DEFAULT_RATE_LIMIT_WAIT_S
    if status == 429 or "rate limit" in message.lower():
        return DEFAULT_RATE_LIMIT_WAIT_S  # a secondary limit without a header: wait at least a minute
    return None


def _retry_after(value: str) -> float:
    try:
        return max(0.0, float(value))
    except ValueError:
        try:  # the HTTP-date form
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return DEFAULT_RATE_LIMIT_WAIT_S
