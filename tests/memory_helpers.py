"""Helpers for the repository-memory suites: installation deliveries, a client acting as an installation, and
a scan of every table of the service database for what it holds of a repository."""

from __future__ import annotations

import sqlite3
from typing import Any

from bot.service.github.client import InstallationClient
from bot.service.github.credentials import AppCredentials
from bot.service.github.github_app import GitHubApp
from tests.fake_github import FakeGitHub

INSTALLATION = 77


def installation_payload(action: str, repos: list[str], event: str = "installation",
                         installation: int = INSTALLATION) -> dict[str, Any]:
    """An `installation` or `installation_repositories` delivery naming `repos`."""
    key = "repositories" if event == "installation" else f"repositories_{action}"
    return {"action": action, "installation": {"id": installation, "account": {"login": "example-org"}},
            key: [{"id": i, "name": r.split("/")[1], "full_name": r, "private": True} for i, r in enumerate(repos)],
            "sender": {"login": "admin", "id": 1, "type": "User"}}


def installation_client(github: FakeGitHub, installation: int = INSTALLATION) -> InstallationClient:
    """A real PyGithub client acting as `installation` against the fake."""
    app = GitHubApp(AppCredentials(app_id=github.app_id, private_key=github.private_key,
                                   api_url=github.base_url), write_interval_s=0.0)
    return app.installation(installation)


def listing_pages(github: FakeGitHub, repo: str) -> list[int]:
    """The page numbers of every issue-listing request to `repo`, in order."""
    from urllib.parse import parse_qsl

    return [int(dict(parse_qsl(r.query)).get("page", 1)) for r in github.requests
            if r.method == "GET" and r.path == f"/repos/{repo}/issues"]


def rows_naming(database_url: str, needles: list[str]) -> list[tuple[str, str]]:
    """(table, needle) for each row of each table of the SQLite database that holds one of `needles` in any
    column (case-insensitive; bytes read as Latin-1)."""
    conn = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        found = []
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):  # the names come from sqlite_master
                text = " ".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in row).casefold()
                found += [(table, needle) for needle in needles if needle.casefold() in text]
        return found
    finally:
        conn.close()
