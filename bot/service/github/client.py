"""GitHub as one installation: the reads and the few writes the bot makes, through PyGithub."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from github import Github
from github.IssueComment import IssueComment

from bot.comment import has_marker
from bot.core.domain import Issue
from bot.memory.models import ListedIssue
from bot.service.errors import NotFound, PermanentGitHubError, RateLimited
from bot.service.github.api_errors import github_errors
from bot.service.github.issues import listed_issue
from bot.service.github.models import Comment, IssueSnapshot, PostedComment
from bot.service.github.payloads import github_time

TIMEOUT_S = 15


class InstallationPause(Protocol):
    """The installation's rate-limit pause, shared by every process (`github/pacing.py`)."""

    def remaining(self) -> float: ...

    def record(self, wait_s: float) -> None: ...


def client_options(api_url: str) -> dict[str, Any]:
    # retry=0 and no PyGithub throttling: the worker owns retries, backoff and the write interval.
    return {"base_url": api_url, "retry": 0, "timeout": TIMEOUT_S, "seconds_between_requests": None,
            "seconds_between_writes": None}


def _association(raw: dict[str, Any]) -> str | None:
    """The issue author's `author_association` as the API gives it (None where it does not)."""
    value = raw.get("author_association")
    return value if isinstance(value, str) and value else None


class InstallationClient:
    """Reads and the few writes the bot makes, as one installation; never deletes, never edits the issue."""

    def __init__(self, gh: Github, pace_write: Callable[[], None], app_id: int | None,
                 pause: InstallationPause | None = None) -> None:
        self._gh = gh
        self._pace_write = pace_write
        self._app_id = app_id
        self._pause = pause

    @contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """One call to GitHub: refused at once while the installation is paused (a rate limit that any
        process met), and a rate limit met here pauses the installation for every process."""
        if self._pause is not None and (wait := self._pause.remaining()) > 0:
            raise RateLimited(f"{what}: the installation is paused by GitHub's rate limit", wait)
        try:
            with github_errors(what):
                yield
        except RateLimited as exc:
            if self._pause is not None:
                self._pause.record(exc.retry_after)
            raise

    def read_issue(self, repo: str, number: int) -> IssueSnapshot:
        with self._calling(f"read {repo}#{number}"):
            issue = self._gh.get_repo(repo).get_issue(number)
            return IssueSnapshot(
                issue=Issue(id=f"{repo}#{number}", title=issue.title, body=issue.body or "", repo=repo,
                            number=number, url=issue.html_url,
                            created_at=github_time(issue.raw_data.get("created_at"))),
                state=issue.state, is_pull_request=issue.pull_request is not None,
                labels=[label.name for label in issue.labels], author_association=_association(issue.raw_data))

    def read_file(self, repo: str, path: str) -> str | None:
        """A text file of the default branch, or None when it does not exist."""
        try:
            with self._calling(f"read {repo}/{path}"):
                content = self._gh.get_repo(repo).get_contents(path)
                if isinstance(content, list):
                    raise PermanentGitHubError(f"{repo}/{path} is a directory, not a file")
                return content.decoded_content.decode("utf-8", errors="replace")
        except NotFound:
            return None

    def find_bot_comment(self, repo: str, number: int) -> Comment | None:
        """The bot's own comment on the issue, found by its hidden marker."""
        found = self._bot_comment(repo, number)
        if found is None:
            return None
        return Comment(id=found.id, body=found.body, author=found.user.login, author_is_bot=True)

    def upsert_comment(self, repo: str, number: int, body: str, known_id: int | None = None) -> PostedComment:
        """Edit the bot's comment in place, or create it; an unchanged body is not written again. `known_id`:
        the comment's id as stored by an earlier triage, read directly (a listing just after a create may not
        show it yet); when it is gone or not the bot's, the comments are searched for the marker."""
        existing = self._comment_by_id(repo, number, known_id) if known_id is not None else None
        existing = existing or self._bot_comment(repo, number)
        if existing is not None and existing.body == body:
            return PostedComment(id=existing.id, created=False, changed=False)
        self._pace_write()
        if existing is not None:
            with self._calling(f"edit comment {existing.id} on {repo}#{number}"):
                existing.edit(body)
            return PostedComment(id=existing.id, created=False, changed=True)
        with self._calling(f"comment on {repo}#{number}"):
            created = self._gh.get_repo(repo).get_issue(number).create_comment(body)
        return PostedComment(id=created.id, created=True, changed=True)

    def _comment_by_id(self, repo: str, number: int, comment_id: int) -> IssueComment | None:
        try:
            with self._calling(f"read comment {comment_id} on {repo}#{number}"):
                comment = self._gh.get_repo(repo).get_issue(number).get_comment(comment_id)
                on_issue = comment.issue_url.rstrip("/").endswith(f"/issues/{number}")
                return comment if on_issue and has_marker(comment.body) and self._is_own(comment) else None
        except NotFound:
            return None

    def _bot_comment(self, repo: str, number: int) -> IssueComment | None:
        with self._calling(f"list comments of {repo}#{number}"):
            for comment in self._gh.get_repo(repo).get_issue(number).get_comments():
                if has_marker(comment.body) and self._is_own(comment):
                    return comment
        return None

    def _is_own(self, comment: IssueComment) -> bool:
        """Written by this App (another bot quoting the marker is left alone)."""
        if comment.user.type != "Bot":
            return False
        app = comment.performed_via_github_app
        # A server that does not report the App, or a workflow token (whose App id we do not know): any bot
        # comment that carries the marker.
        return app is None or self._app_id is None or bool(app.id == self._app_id)

    def add_labels(self, repo: str, number: int, wanted: list[str], present: list[str]) -> list[str]:
        """Add those of `wanted` that the repository has and the issue lacks; returns what was added."""
        with self._calling(f"labels of {repo}"):
            existing = {label.name.casefold(): label.name for label in self._gh.get_repo(repo).get_labels()}
        have = {name.casefold() for name in present}
        to_add = list(dict.fromkeys(existing[name.casefold()] for name in wanted
                                    if name.casefold() in existing and name.casefold() not in have))
        if to_add:
            self._pace_write()
            with self._calling(f"label {repo}#{number}"):
                self._gh.get_repo(repo).get_issue(number).add_to_labels(*to_add)
        return to_add

    def label_names(self, repo: str) -> list[str]:
        """Every label the repository has."""
        with github_errors(f"labels of {repo}"):
            return [label.name for label in self._gh.get_repo(repo).get_labels()]

    def create_label(self, repo: str, name: str, color: str, description: str) -> None:
        """Create one label (`ddl-triage labels create`); never edits or deletes an existing one."""
        self._pace_write()
        with github_errors(f"create the label {name!r} in {repo}"):
            self._gh.get_repo(repo).create_label(name, color, description)

    def role_of(self, repo: str, user: str) -> str | None:
        """The collaborator's role on the repository by name (admin, maintain, write, triage, read or a custom
        role), not the legacy `permission` that folds maintain into write and triage into read; None: none."""
        try:
            with self._calling(f"role of {user} on {repo}"):
                return self._gh.get_repo(repo).get_collaborator_role_name(user) or None
        except NotFound:
            return None

    def reactions(self, repo: str, comment_id: int) -> list[tuple[str, str]]:
        """(login, content) of every reaction on a comment ("+1", "-1", "heart", ...): one request (a page of
        100; the bot's comments gather a handful)."""
        with github_errors(f"reactions on comment {comment_id} of {repo}"):
            _headers, data = self._gh.requester.requestJsonAndCheck(
                "GET", f"/repos/{repo}/issues/comments/{comment_id}/reactions", parameters={"per_page": 100})
        return [(str((r.get("user") or {}).get("login") or ""), str(r.get("content") or ""))
                for r in data if isinstance(r, dict)] if isinstance(data, list) else []

    # --- the repository memory's reads (history sync, live updates, installation repositories) -------------

    def list_issues_page(self, repo: str, page: int, per_page: int = 100, since: datetime | None = None
                         ) -> list[ListedIssue]:
        """One page (1-based) of the repository's issues and pull requests, all states, oldest first: one
        request (the listed objects' `raw_data` would read each issue again, 100 requests a page)."""
        params: dict[str, Any] = {"state": "all", "sort": "created", "direction": "asc", "per_page": per_page,
                                  "page": page}
        if since is not None:
            params["since"] = (since.astimezone(UTC) if since.tzinfo else since).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        with self._calling(f"list issues of {repo}, page {page}"):
            _headers, data = self._gh.requester.requestJsonAndCheck("GET", f"/repos/{repo}/issues", parameters=params)
        return [listed_issue(item) for item in data if isinstance(item, dict)] if isinstance(data, list) else []

    def closing_reference(self, repo: str, number: int) -> tuple[str | None, int | None]:
        """What closed an issue according to its timeline: ("#PR" or a commit sha, duplicate-of number)."""
        closed_by: str | None = None
        duplicate_of: int | None = None
        with self._calling(f"timeline of {repo}#{number}"):
            for event in self._gh.get_repo(repo).get_issue(number).get_timeline():
                data = event.raw_data
                source = (data.get("source") or {}).get("issue") or {}
                if data.get("event") == "cross-referenced" and source.get("pull_request"):
                    merged = (source["pull_request"] or {}).get("merged_at")
                    same_repo = (source.get("repository") or {}).get("full_name", repo) == repo
                    if merged and same_repo:
                        closed_by = f"#{source['number']}"
                elif data.get("event") == "closed" and data.get("commit_id") and closed_by is None:
                    closed_by = str(data["commit_id"])[:12]
                elif data.get("event") == "marked_as_duplicate" and isinstance(source.get("number"), int):
                    duplicate_of = int(source["number"])
        return closed_by, duplicate_of

    def installation_repositories(self) -> list[str]:
        """The full names of every repository this installation may access (paginated by Link headers)."""
        from github.PaginatedList import PaginatedList
        from github.Repository import Repository

        with self._calling("installation repositories"):
            listing = PaginatedList(Repository, self._gh.requester, "/installation/repositories", None,
                                    list_item="repositories")
            return [repo.full_name for repo in listing]

    def pace_reads(self, reserve: int = 100) -> float:
        """Seconds to wait before the next read so that `reserve` requests of the hour stay for triage."""
        remaining, _limit = self._gh.requester.rate_limiting  # from the last answer's headers; no request
        if remaining < 0 or remaining > reserve:
            return 0.0
        wait = self._gh.requester.rate_limiting_resettime - time.time()
        return wait + 1.0 if wait > 0 else 0.0  # past the reset, the last answer's count is stale
