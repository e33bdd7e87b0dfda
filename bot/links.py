"""Web addresses of issues, from the API base URL (github.com or GitHub Enterprise Server): for the comment's
links, the memory's related issues and the corrections' cases alike."""

from __future__ import annotations


def issue_html_url(api_url: str, repo: str, number: int) -> str:
    """The web address of an issue, from the API base URL (github.com or GitHub Enterprise Server)."""
    base = api_url.rstrip("/")
    web = "https://github.com" if base == "https://api.github.com" else base.removesuffix("/api/v3")
    return f"{web}/{repo}/issues/{number}"
