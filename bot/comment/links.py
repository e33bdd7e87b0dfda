"""Links to issues that never ping another project.

GitHub turns a plain issue URL or `owner/repo#N` in a comment into a cross-reference: a "mentioned this issue"
event on the linked issue. A triage bot that cites DeepSpeed's issues from every Megatron-LM issue would spam
DeepSpeed's threads. So an issue of another repository is linked through GitHub's redirect host (as
Dependabot does), with link text that is not itself a reference ("DeepSpeed #1234"); an issue of the
repository the comment is posted on stays a plain `#N`, where the cross-reference is wanted. And the web address
of an issue from the API base URL (`issue_html_url`), for the memory's related issues and the review page too.
"""

from __future__ import annotations

import re

from bot.comment.markdown import escape_markdown

REDIRECT_HOST = "https://redirect.github.com"
_GITHUB_URL = re.compile(r"^https://github\.com/([\w.-]+/[\w.-]+)/(issues|pull)/(\d+)/?$")
_CASE_ID = re.compile(r"^([\w.-]+/[\w.-]+)#(\d+)$")


def same_repo(a: str | None, b: str | None) -> bool:
    return bool(a and b and a.lower() == b.lower())


def case_link(case_id: str, url: str | None, own_repo: str | None) -> str | None:
    """A labelled case as markdown: `#N` in its own repository, a redirect link elsewhere, None when unsafe."""
    found = _GITHUB_URL.match(url or "")
    if found:
        repo, path, number = found.group(1), found.group(2), int(found.group(3))
        if same_repo(repo, own_repo):
            return f"#{number}"
        return f"[{_short_name(repo)} #{number}]({REDIRECT_HOST}/{repo}/{path}/{number})"
    if url and url.startswith("https://") and "github.com" not in url:  # a forum thread: no cross-reference
        return f"[{escape_markdown(case_id, 60)}]({url})"
    named = _CASE_ID.match(case_id)
    if named and same_repo(named.group(1), own_repo):
        return f"#{named.group(2)}"
    return None  # no safe form (a javascript: or http: URL, a GitHub URL of another shape)


def repo_of(case_id: str, url: str | None) -> str | None:
    """The repository a case belongs to, from its GitHub URL or its `owner/repo#N` id."""
    found = _GITHUB_URL.match(url or "") or _CASE_ID.match(case_id)
    return found.group(1) if found else None


def _short_name(repo: str) -> str:
    """`deepspeedai/DeepSpeed` -> `DeepSpeed`: a name, never `owner/repo`, which GitHub would link again."""
    return escape_markdown(repo.split("/")[-1], 40)


_ISSUE_URL_IN_TEXT = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)", re.IGNORECASE)
_CROSS_REFERENCE = re.compile(r"(?<![\w/.-])([\w.-]+/[\w.-]+)#(\d+)\b")
_OWN_REFERENCE = re.compile(r"(?<![\w/&])#(\d+)\b")


def linked_in(text: str, own_repo: str | None) -> frozenset[str]:
    """The issues a post links (`owner/repo#n`, lower-case): GitHub URLs, `owner/repo#N`, and `#N` of its own
    repository. The comment never echoes one back as a precedent: the reporter already knows it."""
    found = {f"{repo}#{int(number)}".lower() for repo, number in _ISSUE_URL_IN_TEXT.findall(text or "")}
    found |= {f"{repo}#{int(number)}".lower() for repo, number in _CROSS_REFERENCE.findall(text or "")}
    if own_repo:
        found |= {f"{own_repo}#{int(number)}".lower() for number in _OWN_REFERENCE.findall(text or "")}
    return frozenset(found)


def number_in_repo(case_id: str, url: str | None, repo: str | None) -> int | None:
    """An issue's number in `repo`, from its `owner/repo#N` id or its GitHub URL (a batch line may carry either
    instead of a number)."""
    found = _GITHUB_URL.match(url or "") or _CASE_ID.match(case_id or "")
    if found and same_repo(found.group(1), repo):
        return int(found.group(found.lastindex or 0))
    return None


def issue_html_url(api_url: str, repo: str, number: int) -> str:
    """The web address of an issue, from the API base URL (github.com or GitHub Enterprise Server)."""
    base = api_url.rstrip("/")
    web = "https://github.com" if base == "https://api.github.com" else base.removesuffix("/api/v3")
    return f"{web}/{repo}/issues/{number}"
