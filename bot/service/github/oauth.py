"""Sign-in with GitHub through the App's own OAuth (a user-to-server token), and the role check with it: a
user sees a repository only where GitHub says their role may triage (admin, maintain, write, triage)."""

from __future__ import annotations

import logging
from urllib.parse import quote, urlencode

import httpx

from bot.core.settings import Settings
from bot.service.github.models import TRIAGE_ROLES

log = logging.getLogger(__name__)

TIMEOUT_S = 15.0


class SignInFailed(Exception):
    """GitHub refused the sign-in (a bad or used code, a revoked token) or could not be reached."""


def oauth_enabled(settings: Settings) -> bool:
    return bool(settings.github_oauth_client_id and settings.github_oauth_client_secret
                and settings.github_oauth_client_id.get_secret_value()
                and settings.github_oauth_client_secret.get_secret_value())


def review_enabled(settings: Settings) -> bool:
    """The page is served only when someone can sign in: the App's OAuth client, or the ops token."""
    token = settings.ops_token
    return oauth_enabled(settings) or bool(token and token.get_secret_value())


def authorize_url(settings: Settings, redirect_uri: str, state: str) -> str:
    assert settings.github_oauth_client_id is not None
    query = urlencode({"client_id": settings.github_oauth_client_id.get_secret_value(),
                       "redirect_uri": redirect_uri, "state": state})
    return f"{settings.github_web_url.rstrip('/')}/login/oauth/authorize?{query}"


def exchange_code(settings: Settings, code: str, redirect_uri: str) -> str:
    """The user's token for the code GitHub sent back to the callback."""
    assert settings.github_oauth_client_id is not None and settings.github_oauth_client_secret is not None
    body = {"client_id": settings.github_oauth_client_id.get_secret_value(),
            "client_secret": settings.github_oauth_client_secret.get_secret_value(), "code": code,
            "redirect_uri": redirect_uri}
    try:
        answer = httpx.post(f"{settings.github_web_url.rstrip('/')}/login/oauth/access_token", json=body,
                            headers={"Accept": "application/json"}, timeout=TIMEOUT_S)
        data = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise SignInFailed(f"GitHub's token endpoint could not be read: {type(exc).__name__}") from None
    token = data.get("access_token") if isinstance(data, dict) else None
    if answer.status_code != 200 or not isinstance(token, str) or not token:
        error = data.get("error_description") or data.get("error") if isinstance(data, dict) else None
        raise SignInFailed(f"GitHub refused the sign-in code ({error or answer.status_code})")
    return token


def user_login(settings: Settings, token: str) -> str:
    """Who the token belongs to (GET /user)."""
    try:
        answer = httpx.get(f"{settings.github_api_url.rstrip('/')}/user", headers=_auth(token), timeout=TIMEOUT_S)
        login = answer.json().get("login") if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise SignInFailed(f"GitHub's /user could not be read: {type(exc).__name__}") from None
    if not isinstance(login, str) or not login:
        raise SignInFailed(f"GitHub did not say who signed in ({answer.status_code})")
    return login


def triage_repos(settings: Settings, token: str, login: str, repos: list[str]) -> list[str]:
    """Those of `repos` where the user's role may triage, read with their own token (one request each); a
    repository GitHub does not answer for is left out."""
    allowed: list[str] = []
    with httpx.Client(base_url=settings.github_api_url.rstrip("/"), headers=_auth(token), timeout=TIMEOUT_S) as http:
        for repo in repos:
            try:
                answer = http.get(f"/repos/{quote(repo)}/collaborators/{quote(login)}/permission")
                role = answer.json().get("role_name") if answer.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError) as exc:
                log.warning("the role of %s on %s could not be read: %s", login, repo, type(exc).__name__)
                continue
            if role in TRIAGE_ROLES:
                allowed.append(repo)
    return allowed


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}
