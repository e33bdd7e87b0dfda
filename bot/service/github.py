"""The one module that knows GitHub: webhook payload shapes, REST URLs (through PyGithub) and its errors."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import requests
from github import Auth, Github, GithubException, GithubIntegration
from github.GithubObject import NotSet
from github.IssueComment import IssueComment

from bot.comment import has_marker
from bot.domain import Issue
from bot.service.credentials import AppCredentials
from bot.service.errors import (
    MalformedPayload,
    NotFound,
    PayloadFieldError,
    PermanentGitHubError,
    RateLimited,
    TransientGitHubError,
)
from bot.service.events import Comment, IssueSnapshot, PostedComment, WebhookEvent

log = logging.getLogger(__name__)

TOKEN_MARGIN_S = 300.0  # renew an installation token five minutes before GitHub expires it
DEFAULT_RATE_LIMIT_WAIT_S = 60.0
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
TIMEOUT_S = 15
MAX_CACHED_INSTALLATIONS = 1024
MAX_ID = 2**53  # ids and numbers beyond this are no GitHub's (and would overflow the database's integers)



def issue_html_url(api_url: str, repo: str, number: int) -> str:
    """The web address of an issue, from the API base URL (github.com or GitHub Enterprise Server)."""
    base = api_url.rstrip("/")
    web = "https://github.com" if base == "https://api.github.com" else base.removesuffix("/api/v3")
    return f"{web}/{repo}/issues/{number}"


# --- webhook payloads -------------------------------------------------------------------------------------


def payload_action(payload: dict[str, Any]) -> str:
    """The delivery's `action` ("" for events without one)."""
    action = payload.get("action", "")
    if not isinstance(action, str):
        raise PayloadFieldError("action", "is not a string")
    return action


def parse_event(event: str, payload: dict[str, Any]) -> WebhookEvent:
    """An `issues` or `issue_comment` payload as a domain event; a missing field raises PayloadFieldError."""
    if event in INSTALLATION_EVENTS:
        return _installation_event(event, payload)
    issue = _get(payload, "issue", dict)
    sender = _get(payload, "sender", dict)
    repo = _get(payload, "repository.full_name", str)
    number = _get(payload, "issue.number", int)
    installation = payload.get("installation")
    return WebhookEvent(
        event=event, action=payload_action(payload), repo=repo, number=number,
        installation_id=_get(payload, "installation.id", int) if isinstance(installation, dict) else None,
        sender=_get(payload, "sender.login", str), sender_is_bot=sender.get("type") == "Bot",
        is_pull_request=bool(issue.get("pull_request")),
        issue=_issue(issue, repo, number), issue_state=str(issue.get("state") or "open"),
        issue_labels=_label_names(issue.get("labels")),
        comment=_comment(payload) if event == "issue_comment" else None)


INSTALLATION_EVENTS = frozenset({"installation", "installation_repositories"})


def _installation_event(event: str, payload: dict[str, Any]) -> WebhookEvent:
    """An installation's delivery: one job per installation (its key), the repositories stay in the payload."""
    installation = _get(payload, "installation.id", int)
    sender = _get(payload, "sender", dict)
    return WebhookEvent(event=event, action=payload_action(payload), repo=f"installation/{installation}",
                        number=0, installation_id=installation, sender=_get(payload, "sender.login", str),
                        sender_is_bot=sender.get("type") == "Bot", issue=Issue(id=f"installation/{installation}"))


def _get(payload: dict[str, Any], path: str, kind: type) -> Any:
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value or value[part] is None:
            raise PayloadFieldError(path)
        value = value[part]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PayloadFieldError(path, f"is not a {kind.__name__}")
    if isinstance(value, int) and not 0 <= value < MAX_ID:
        raise MalformedPayload(f"payload field {path!r} is out of range ({str(value)[:30]}...)")
    if isinstance(value, str):
        _check_text(value, path)
    return value


def _check_text(value: str, path: str) -> str:
    """Text that can be stored and sent on: a lone surrogate (valid JSON, invalid Unicode) is refused."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedPayload(f"payload field {path!r} is not valid Unicode (a lone surrogate at "
                               f"{exc.start})") from None
    return value


def _issue(issue: dict[str, Any], repo: str, number: int) -> Issue:
    title = issue.get("title")
    if not isinstance(title, str):
        raise PayloadFieldError("issue.title")
    body = _check_text(str(issue.get("body") or ""), "issue.body")
    return Issue(id=f"{repo}#{number}", title=_check_text(title, "issue.title"), body=body, repo=repo,
                 number=number, url=issue.get("html_url"))


def _comment(payload: dict[str, Any]) -> Comment:
    user = _get(payload, "comment.user", dict)
    body = _check_text(str(payload["comment"].get("body") or ""), "comment.body")
    return Comment(id=_get(payload, "comment.id", int), body=body,
                   author=_get(payload, "comment.user.login", str), author_is_bot=user.get("type") == "Bot",
                   author_association=payload["comment"].get("author_association"))


def _label_names(labels: object) -> list[str]:
    if not isinstance(labels, list):
        return []
    return [str(label["name"]) for label in labels if isinstance(label, dict) and "name" in label]


# --- errors -----------------------------------------------------------------------------------------------


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


# --- the REST API -----------------------------------------------------------------------------------------


def client_options(api_url: str) -> dict[str, Any]:
    # retry=0 and no PyGithub throttling: the worker owns retries, backoff and the write interval.
    return {"base_url": api_url, "retry": 0, "timeout": TIMEOUT_S, "seconds_between_requests": None,
            "seconds_between_writes": None}


class GitHubApp:
    """The App: a JWT buys installation tokens, cached until shortly before they expire."""

    def __init__(self, credentials: AppCredentials, write_interval_s: float = 1.0) -> None:
        self.api_url = credentials.api_url
        self.app_id = int(credentials.app_id)
        self._integration = GithubIntegration(auth=Auth.AppAuth(credentials.app_id, credentials.private_key),
                                              **client_options(credentials.api_url))
        self._write_interval_s = write_interval_s
        self._lock = threading.Lock()
        self._clients: dict[int, tuple[float, InstallationClient]] = {}
        self._last_write: dict[int, float] = {}
        self._reserve: Callable[[int, float], float] | None = None

    def pace_with(self, reserve: Callable[[int, float], float]) -> None:
        """Book writes with `reserve(installation, interval)` -> the time to write at (a booking in the shared
        database, so that every replica's writes to one installation are paced together)."""
        self._reserve = reserve

    def installation(self, installation_id: int) -> InstallationClient:
        """A client acting as one installation (a token is fetched only when none is cached)."""
        with self._lock:
            cached = self._clients.get(installation_id)
            if cached and cached[0] - TOKEN_MARGIN_S > time.time():
                return cached[1]
        with github_errors(f"installation {installation_id} token"):
            grant = self._integration.get_access_token(installation_id)
        client = InstallationClient(Github(auth=Auth.Token(grant.token), lazy=True,
                                           **client_options(self.api_url)),
                                    lambda: self._pace_write(installation_id), self.app_id)
        with self._lock:
            self._clients[installation_id] = (grant.expires_at.timestamp(), client)
            while len(self._clients) > MAX_CACHED_INSTALLATIONS:  # bounded: the oldest token goes first
                del self._clients[min(self._clients, key=lambda key: self._clients[key][0])]
        return client

    def _pace_write(self, installation_id: int) -> None:
        """At most one write per `write_interval_s` per installation (GitHub's guidance for bots)."""
        if self._write_interval_s <= 0:
            return
        if self._reserve is not None:
            wait = self._reserve(installation_id, self._write_interval_s) - time.time()
            if wait > 0:
                time.sleep(wait)
            return
        with self._lock:
            now = time.monotonic()
            due = self._last_write.get(installation_id, 0.0) + self._write_interval_s
            self._last_write[installation_id] = max(now, due)
            if len(self._last_write) > MAX_CACHED_INSTALLATIONS:  # bounded: forget bookings already past
                self._last_write = {k: v for k, v in self._last_write.items() if v > now}
        if due > now:
            time.sleep(due - now)


class InstallationClient:
    """Reads and the few writes the bot makes, as one installation; never deletes, never edits the issue."""

    def __init__(self, gh: Github, pace_write: Callable[[], None], app_id: int | None) -> None:
        self._gh = gh
        self._pace_write = pace_write
        self._app_id = app_id

    def read_issue(self, repo: str, number: int) -> IssueSnapshot:
        with github_errors(f"read {repo}#{number}"):
            issue = self._gh.get_repo(repo).get_issue(number)
            return IssueSnapshot(
                issue=Issue(id=f"{repo}#{number}", title=issue.title, body=issue.body or "", repo=repo,
                            number=number, url=issue.html_url),
                state=issue.state, is_pull_request=issue.pull_request is not None,
                labels=[label.name for label in issue.labels])

    def read_file(self, repo: str, path: str) -> str | None:
        """A text file of the default branch, or None when it does not exist."""
        try:
            with github_errors(f"read {repo}/{path}"):
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

    def upsert_comment(self, repo: str, number: int, body: str) -> PostedComment:
        """Edit the bot's comment in place, or create it; an unchanged body is not written again."""
        existing = self._bot_comment(repo, number)
        if existing is not None and existing.body == body:
            return PostedComment(id=existing.id, created=False, changed=False)
        self._pace_write()
        if existing is not None:
            with github_errors(f"edit comment {existing.id} on {repo}#{number}"):
                existing.edit(body)
            return PostedComment(id=existing.id, created=False, changed=True)
        with github_errors(f"comment on {repo}#{number}"):
            created = self._gh.get_repo(repo).get_issue(number).create_comment(body)
        return PostedComment(id=created.id, created=True, changed=True)

    def _bot_comment(self, repo: str, number: int) -> IssueComment | None:
        with github_errors(f"list comments of {repo}#{number}"):
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
        with github_errors(f"labels of {repo}"):
            existing = {label.name.casefold(): label.name for label in self._gh.get_repo(repo).get_labels()}
        have = {name.casefold() for name in present}
        to_add = list(dict.fromkeys(existing[name.casefold()] for name in wanted
                                    if name.casefold() in existing and name.casefold() not in have))
        if to_add:
            self._pace_write()
            with github_errors(f"label {repo}#{number}"):
                self._gh.get_repo(repo).get_issue(number).add_to_labels(*to_add)
        return to_add

    def can_write(self, repo: str, user: str) -> bool:
        """Whether `user` has write access (or more) to the repository."""
        try:
            with github_errors(f"permission of {user} on {repo}"):
                return self._gh.get_repo(repo).get_collaborator_permission(user) in WRITE_PERMISSIONS
        except NotFound:
            return False

    # --- the repository memory's reads (history sync, live updates, installation repositories) -------------

    def list_issues_page(self, repo: str, page: int, per_page: int = 100, since: datetime | None = None
                         ) -> list[dict[str, Any]]:
        """One page (1-based) of the repository's issues and pull requests, all states, oldest first."""
        self._gh.per_page = per_page
        with github_errors(f"list issues of {repo}, page {page}"):
            listing = self._gh.get_repo(repo).get_issues(state="all", sort="created", direction="asc",
                                                         since=since if since else NotSet)
            return [issue.raw_data for issue in listing.get_page(page - 1)]

    def closing_reference(self, repo: str, number: int) -> tuple[str | None, int | None]:
        """What closed an issue according to its timeline: ("#PR" or a commit sha, duplicate-of number)."""
        closed_by: str | None = None
        duplicate_of: int | None = None
        with github_errors(f"timeline of {repo}#{number}"):
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

        with github_errors("installation repositories"):
            listing = PaginatedList(Repository, self._gh.requester, "/installation/repositories", None,
                                    list_item="repositories")
            return [repo.full_name for repo in listing]

    def pace_reads(self, reserve: int = 100) -> float:
        """Seconds to wait before the next read so that `reserve` requests of the hour stay for triage."""
        remaining, _limit = self._gh.requester.rate_limiting  # from the last answer's headers; no request
        if remaining < 0 or remaining > reserve:
            return 0.0
        return max(0.0, self._gh.requester.rate_limiting_resettime - time.time()) + 1.0


# --- the App's webhook deliveries (issue 9: missed-delivery recovery) ----------------------------------------


def hook_deliveries(app: GitHubApp, max_pages: int = 10) -> list[dict[str, Any]]:
    """The App's recent webhook deliveries, newest first (`GET /app/hook/deliveries`, as the App's JWT)."""
    requester = app._integration.requester
    url: str | None = "/app/hook/deliveries?per_page=100"
    found: list[dict[str, Any]] = []
    for _ in range(max_pages):
        if url is None:
            break
        with github_errors("list the App's webhook deliveries"):
            headers, data = requester.requestJsonAndCheck("GET", url)
        found += [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []
        url = _next_link(headers.get("link", ""))
    return found


def redeliver(app: GitHubApp, delivery_id: int) -> None:
    """Ask GitHub to send one delivery again (`POST /app/hook/deliveries/{id}/attempts`)."""
    with github_errors(f"redeliver webhook delivery {delivery_id}"):
        app._integration.requester.requestJsonAndCheck("POST", f"/app/hook/deliveries/{delivery_id}/attempts")


def _next_link(link: str) -> str | None:
    for part in link.split(","):
        target, _, rel = part.partition(";")
        if 'rel="next"' in rel:
            return target.strip().strip("<>")
    return None
