"""Driving the review page as a browser would, in process: sign-in through the fake GitHub's OAuth."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import httpx
from fastapi.testclient import TestClient
from pydantic import SecretStr

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.web.app import create_app
from tests.fake_github import FAST, FakeGitHub, load_payload

OTHER = "example-org/otherdist"  # a second repository of the same installation


def review_settings(app_settings: Settings, github: FakeGitHub, **overrides: Any) -> Settings:
    """The App's settings with its OAuth client (the fake's) and shadow mode: decisions stored, not posted."""
    client_id, secret = github.oauth_client
    return app_settings.model_copy(update={"github_oauth_client_id": SecretStr(client_id),
                                           "github_oauth_client_secret": SecretStr(secret),
                                           "github_web_url": github.base_url, "shadow": True} | overrides)


@contextmanager
def browser(settings: Settings, engine: Engine | None, https: bool = False) -> Iterator[TestClient]:
    """The real app with its worker, and a client with no ops token: a person's browser."""
    base_url = "https://testserver" if https else "http://testserver"
    with TestClient(create_app(settings, engine=engine, options=replace(FAST)), base_url=base_url) as client:
        yield client


def sign_in_with_github(client: TestClient, github: FakeGitHub, login: str) -> httpx.Response:
    """`login` clicks "Sign in with GitHub": the page sends them to the fake's authorize page, which sends
    them back with a code; returns the callback's answer (a redirect to /review, with the session cookie)."""
    github.browser_user = login
    to_github = client.get("/review/login/github", follow_redirects=False)
    assert to_github.status_code == 303, to_github.text
    back = httpx.get(to_github.headers["location"], follow_redirects=False)
    assert back.status_code == 302, back.text
    return client.get(back.headers["location"].removeprefix(str(client.base_url)), follow_redirects=False)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF token on the page"
    return found.group(1)


def other_repo_payload(github: FakeGitHub, number: int = 7) -> dict[str, Any]:
    """A delivery about an issue of OTHER (the same installation), with the fake agreeing about it."""
    if OTHER not in github.repos:
        github.add_repo(OTHER)
    payload = load_payload("issues-opened")
    payload["repository"] |= {"full_name": OTHER, "name": OTHER.split("/")[1]}
    payload["issue"] |= {"number": number, "html_url": f"https://github.com/{OTHER}/issues/{number}"}
    github.add_issue(payload)
    return payload
