"""GitHub, both directions, for tests: a recording REST API on 127.0.0.1, and signed webhook deliveries.

`FakeGitHub` speaks enough of the REST API for PyGithub (App tokens, issues, comments, contents, labels,
permissions), checks the App's JWT and the installation tokens, records every request, and can be told
to fail the next requests to a path (a status and headers, or a dropped connection). The second half
drives the real service as GitHub does: an App configured against the fake, signed deliveries, waits.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient
from pydantic import SecretStr

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.state import ServiceOptions, ServiceState
from bot.service.web.app import create_app
from bot.service.web.signature import sign_body
from tests.loopback import serving

PAYLOADS = Path(__file__).parent / "payloads"
REPO = "example-org/fastdist"  # the repository of the payloads in tests/payloads
COMMENTS = f"/repos/{REPO}/issues/42/comments"
BOT_LOGIN = "ddl-triage[bot]"
SECRET = "test-webhook-secret"
OPS_TOKEN = "test-ops-token"
FAST = ServiceOptions(shutdown_timeout_s=10.0)
DROP = 0  # a "status" that closes the connection without an answer
# GitHub's legacy `permission` of a collaborator role (`role_name`); a role not named here keeps its name.
LEGACY_PERMISSION = {"maintain": "write", "triage": "read"}


@cache
def app_private_key() -> str:
    """A throwaway RSA key for the App's JWT (made once per test session)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def public_key(private_pem: str) -> Any:
    return serialization.load_pem_private_key(private_pem.encode(), password=None).public_key()


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    body: Any
    authorization: str
    at: float = field(default_factory=time.monotonic)


@dataclass
class FakeRepo:
    full_name: str
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    label_details: dict[str, dict[str, Any]] = field(default_factory=dict)  # created through the API
    files: dict[str, str] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)  # login -> collaborator role (admin ... read)
    timelines: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    issues_disabled: bool = False  # listing its issues answers 410, as GitHub does for a fork without issues


@dataclass
class Hold:
    """One request held by the fake (see `FakeGitHub.hold`): `arrived` is set while it waits."""

    after: bool
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    dropped: bool = False

    def wait(self, timeout: float = 120.0) -> None:
        self.arrived.set()
        self.released.wait(timeout)

    def release(self, drop: bool = False) -> None:
        """Let the request go on; with `drop`, a request held before its answer is dropped unanswered
        (its client is gone, as after a kill -9: it has no effect)."""
        self.dropped = drop
        self.released.set()


class FakeGitHub:
    """A recording stand-in for api.github.com; state lives in plain dicts the tests inspect."""

    def __init__(self, app_id: int = 4242, token_ttl_s: float = 3600.0) -> None:
        self.app_id = app_id
        self.private_key = app_private_key()
        self._public_key = public_key(self.private_key)
        self.token_ttl_s = token_ttl_s
        self.repos: dict[str, FakeRepo] = {}
        self.comments: dict[int, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self.tokens: dict[str, int] = {}
        self.installations: dict[int, list[str]] = {}  # installation id -> its repositories (default: all)
        self._failures: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        self._outage: list[tuple[float, int, dict[str, str]]] = []  # (until, status, headers), in order
        # The App's webhook deliveries (GET /app/hook/deliveries), newest first; a redelivery calls `redeliver`.
        self.hook_deliveries: list[dict[str, Any]] = []
        self.redeliver: Callable[[dict[str, Any]], None] = lambda delivery: None
        self._holds: dict[tuple[str, str], Hold] = {}
        self._rate: list[float] | None = None  # [requests left, reset time] (see `limit_rate`)
        self._lock = threading.Lock()
        self._next_id = 1000
        # The OAuth of the App (sign-in with GitHub): its client, who is signed in to the fake's web pages (the
        # authorize page answers as them), the codes it handed out and the user tokens they were exchanged for.
        self.oauth_client = ("Iv1.fake-client-id", "fake-client-secret")
        self.browser_user: str | None = None
        self.oauth_codes: dict[str, tuple[str, str]] = {}  # code -> (login, redirect_uri)
        self.user_tokens: dict[str, str] = {}  # token -> login
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[FakeGitHub]:
        with serving(self._httpd):
            yield self

    # --- arranging ----------------------------------------------------------------------------------------

    def add_repo(self, full_name: str, labels: list[str] | None = None, config: str | None = None,
                 permissions: dict[str, str] | None = None) -> FakeRepo:
        repo = FakeRepo(full_name, labels=list(labels or []), permissions=dict(permissions or {}))
        if config is not None:
            repo.files[".github/ddl-triage.yml"] = config
        self.repos[full_name] = repo
        return repo

    def add_issue(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Make the API agree with a webhook payload's issue (as GitHub's would)."""
        repo = self.repos[payload["repository"]["full_name"]]
        issue = copy.deepcopy(payload["issue"])
        issue["url"] = f"{self.base_url}/repos/{repo.full_name}/issues/{issue['number']}"
        issue["comments_url"] = issue["url"] + "/comments"
        repo.issues[issue["number"]] = issue
        return issue

    def add_comment(self, repo: str, number: int, body: str, login: str = "maintainer", kind: str = "User",
                    via_app: int | None = None) -> int:
        """A comment by `login`; `via_app` is the id of the GitHub App that wrote it, if one did."""
        with self._lock:
            self._next_id += 1
            comment_id = self._next_id
        self.comments[comment_id] = self._comment_json(repo, number, comment_id, body, login, kind)
        if via_app is not None:
            self.comments[comment_id]["performed_via_github_app"] = {"id": via_app, "slug": login.removesuffix("[bot]"),
                                                                    "name": login.removesuffix("[bot]")}
        return comment_id

    def fail(self, method: str, path: str, *answers: tuple[int, dict[str, str]] | tuple[int, dict[str, str], str]
             ) -> None:
        """The next requests to `method path` get these answers (status, headers[, message]), not the real one."""
        self._failures.setdefault((method, path), []).extend(answers)

    def limit_rate(self, remaining: int, reset_in_s: float) -> None:
        """From now on installation requests count down from `remaining`, each answer carrying GitHub's
        x-ratelimit-* headers; at 0 every one gets GitHub's 403 "rate limit exceeded" until the reset."""
        self._rate = [float(remaining), time.time() + reset_in_s]

    def rate_remaining(self) -> int | None:
        """Installation requests left in the hour (see `limit_rate`; None: no limit set)."""
        with self._lock:
            return None if self._rate is None else int(self._rate[0])

    def revoke_tokens(self) -> None:
        """Every installation token issued so far is refused (401 Bad credentials), as after a revocation."""
        with self._lock:
            self.tokens.clear()

    def _rate_limited(self, path: str, answer: tuple[int, dict[str, str], Any]) -> tuple[int, dict[str, str], Any]:
        if self._rate is None or path.startswith("/app/"):
            return answer
        with self._lock:
            exhausted = self._rate[0] <= 0
            self._rate[0] = max(0.0, self._rate[0] - 1)
            left, reset = int(self._rate[0]), int(self._rate[1])
        headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": str(left), "x-ratelimit-reset": str(reset)}
        if exhausted:
            return 403, headers, {"message": "API rate limit exceeded for installation ID 77."}
        return answer[0], answer[1] | headers, answer[2]

    # --- outages (issue 9: the service under faults) -------------------------------------------------------

    def outage(self, *phases: tuple[float, int, dict[str, str]]) -> None:
        """From now on, every repository request gets each phase's answer for its seconds, in turn:
        e.g. (3.0, 502, {}) then (1.0, 403, {"retry-after": "1"}); DROP closes the connection."""
        at = time.monotonic()
        with self._lock:
            self._outage = []
            for seconds, status, headers in phases:
                at += seconds
                self._outage.append((at, status, headers))

    def _outage_answer(self, path: str) -> tuple[int, dict[str, str]] | None:
        now = time.monotonic()
        if not path.startswith("/repos/"):
            return None
        for until, status, headers in self._outage:
            if now < until:
                return status, headers
        return None

    def hold(self, method: str, path: str, after: bool = False) -> Hold:
        """The next request to `method path` waits until released: before it is answered, or with `after`,
        once it has taken effect (a comment written) but before its answer is sent. For killing a client
        mid-request; one request only, later ones pass."""
        hold = Hold(after=after)
        with self._lock:
            self._holds[(method, path)] = hold
        return hold

    def _take_hold(self, method: str, path: str) -> Hold | None:
        with self._lock:
            return self._holds.pop((method, path), None)

    # --- the App's webhook deliveries (issue 9: missed-delivery recovery) ---------------------------------

    def add_hook_delivery(self, guid: str, status_code: int, payload: dict[str, Any], event: str = "issues",
                          age_s: float = 60.0) -> dict[str, Any]:
        """A delivery GitHub made to the App's webhook (`payload` is kept for its redelivery)."""
        with self._lock:
            self._next_id += 1
            item = {"id": self._next_id, "guid": guid, "status_code": status_code,
                    "status": "OK" if status_code < 300 else "Service Unavailable", "event": event,
                    "action": payload.get("action"), "redelivery": False,
                    "delivered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age_s)),
                    "_payload": payload}
            self.hook_deliveries.insert(0, item)
        return item

    def work_requests(self) -> list[Recorded]:
        """Requests made for some delivery's work: all but the recovery sweep's listing of deliveries."""
        return [r for r in self.requests if not (r.method == "GET" and r.path == "/app/hook/deliveries")]

    def _hook_deliveries_route(self, method: str, rest: list[str], auth: str) -> tuple[int, dict[str, str], Any]:
        try:
            jwt.decode(auth.removeprefix("Bearer "), self._public_key, algorithms=["RS256"])
        except jwt.PyJWTError as exc:
            return 401, {}, {"message": f"A JSON web token could not be decoded ({exc})"}
        if method == "GET" and not rest:
            return 200, {}, [_public(item) for item in self.hook_deliveries]
        if method == "POST" and len(rest) == 2 and rest[1] == "attempts" and rest[0].isdigit():
            [item] = [d for d in self.hook_deliveries if d["id"] == int(rest[0])] or [None]
            if item is None:
                return 404, {}, {"message": "Not Found"}
            self.redeliver(item)
            return 202, {}, {}
        return 404, {}, {"message": "Not Found"}

    # --- inspecting ---------------------------------------------------------------------------------------

    def comments_on(self, repo: str, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["_repo"] == repo and c["_number"] == number]

    def bot_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments_on(repo, number) if c["user"]["login"] == BOT_LOGIN]

    def writes(self) -> list[Recorded]:
        """Every request that is not a read, App and OAuth token requests excepted."""
        return [r for r in self.requests if r.method != "GET" and not r.path.startswith(("/app/", "/login/oauth/"))]

    def assert_nothing_destructive(self) -> None:
        """No DELETE, no edit of an issue (its state, title, body or labels), ever."""
        for r in self.requests:
            assert r.method != "DELETE", f"DELETE {r.path}"
            assert not (r.method in ("PATCH", "PUT") and "/issues/comments/" not in r.path), f"{r.method} {r.path}"

    # --- serving ------------------------------------------------------------------------------------------

    def answer(self, method: str, path: str, query: str, body: Any, auth: str) -> tuple[int, dict[str, str], Any]:
        return self._rate_limited(path, self._answer(method, path, query, body, auth))

    def _answer(self, method: str, path: str, query: str, body: Any, auth: str) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.requests.append(Recorded(method, path, query, body, auth))
            queued = self._failures.get((method, path))
            failure = queued.pop(0) if queued else self._outage_answer(path)
        if failure is not None:
            status, headers, *message = failure
            default = ("Server Error" if status >= 500 else
                       "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
            return status, headers, {"message": message[0] if message else default}
        parts = path.strip("/").split("/")
        if parts[:2] == ["login", "oauth"] and len(parts) == 3:
            return self._oauth(parts[2], method, query, body)
        if auth.partition(" ")[2] in self.user_tokens:
            return self._as_user(self.user_tokens[auth.partition(" ")[2]], method, parts)
        if parts[:2] == ["app", "installations"] and method == "POST":
            return self._access_token(int(parts[2]), auth)
        if parts[:3] == ["app", "hook", "deliveries"]:
            return self._hook_deliveries_route(method, parts[3:], auth)
        if parts[0] == "repos" and parts[3:] == ["installation"] and method == "GET":
            return self._repo_installation("/".join(parts[1:3]), auth)
        if not self._token_ok(auth):
            return 401, {}, {"message": "Bad credentials"}
        if parts == ["installation", "repositories"]:
            return self._installation_repositories(auth, query)
        if parts[0] != "repos" or len(parts) < 3 or "/".join(parts[1:3]) not in self.repos:
            return 404, {}, {"message": "Not Found"}
        if not self._token_reaches(auth, "/".join(parts[1:3])):  # another installation's repository
            return 404, {}, {"message": "Not Found"}
        return self._repo_route(self.repos["/".join(parts[1:3])], method, parts[3:], body, query)

    def _access_token(self, installation_id: int, auth: str) -> tuple[int, dict[str, str], Any]:
        try:
            claims = jwt.decode(auth.removeprefix("Bearer "), self._public_key, algorithms=["RS256"])
        except jwt.PyJWTError as exc:
            return 401, {}, {"message": f"A JSON web token could not be decoded ({exc})"}
        if str(claims.get("iss")) != str(self.app_id):
            return 401, {}, {"message": "Integration not found"}
        token = f"ghs_{uuid.uuid4().hex}"
        self.tokens[token] = installation_id
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + self.token_ttl_s))
        return 201, {}, {"token": token, "expires_at": expires, "permissions": {"issues": "write"},
                         "repository_selection": "selected"}

    def _token_reaches(self, auth: str, full_name: str) -> bool:
        """An installation listed in `installations` reaches only its own repositories."""
        names = self.installations.get(self.tokens[auth.partition(" ")[2]])
        return names is None or full_name in names
    def _oauth(self, step: str, method: str, query: str, body: Any) -> tuple[int, dict[str, str], Any]:
        """GET /login/oauth/authorize (the browser: straight back to redirect_uri with a code, as the signed-in
        `browser_user` who has authorised the App before) and POST /login/oauth/access_token (the code for a
        user-to-server token)."""
        params = dict(parse_qsl(query))
        if step == "authorize" and method == "GET":
            if params.get("client_id") != self.oauth_client[0] or self.browser_user is None:
                return 404, {}, {"message": "unknown client or nobody signed in"}
            code = uuid.uuid4().hex
            self.oauth_codes[code] = (self.browser_user, params.get("redirect_uri", ""))
            target = f"{params.get('redirect_uri', '')}?{urlencode({'code': code, 'state': params.get('state', '')})}"
            return 302, {"Location": target}, {}
        if step == "access_token" and method == "POST":
            given = body if isinstance(body, dict) else {}
            if (given.get("client_id"), given.get("client_secret")) != self.oauth_client:
                return 200, {}, {"error": "incorrect_client_credentials"}
            found = self.oauth_codes.pop(str(given.get("code")), None)  # a code is good once
            if found is None or given.get("redirect_uri", found[1]) != found[1]:
                return 200, {}, {"error": "bad_verification_code"}
            token = f"ghu_{uuid.uuid4().hex}"
            self.user_tokens[token] = found[0]
            return 200, {}, {"access_token": token, "token_type": "bearer", "scope": ""}
        return 404, {}, {"message": "Not Found"}

    def _as_user(self, login: str, method: str, parts: list[str]) -> tuple[int, dict[str, str], Any]:
        """What a user-to-server token may read here: GET /user and a collaborator's role on a repository."""
        if method == "GET" and parts == ["user"]:
            return 200, {}, {"login": login, "id": abs(hash(login)) % 10**6, "type": "User"}
        if (method == "GET" and len(parts) == 6 and parts[0] == "repos" and parts[3] == "collaborators"
                and parts[5] == "permission" and "/".join(parts[1:3]) in self.repos):
            return self._repo_route(self.repos["/".join(parts[1:3])], method, parts[3:], None)
        return 404, {}, {"message": "Not Found"}

    def react(self, comment_id: int, login: str, content: str) -> None:
        """A reaction ("+1", "-1", "heart", ...) by `login` on a comment."""
        with self._lock:
            self._next_id += 1
            reaction_id = self._next_id
        self.comments[comment_id].setdefault("_reactions", []).append(
            {"id": reaction_id, "content": content, "user": {"login": login, "type": "User"},
             "created_at": "2024-05-02T12:00:00Z"})

    def _token_ok(self, auth: str) -> bool:
        scheme, _, token = auth.partition(" ")
        return scheme.lower() in ("token", "bearer") and token in self.tokens

    def _repo_route(self, repo: FakeRepo, method: str, rest: list[str], body: Any, query: str = ""
                    ) -> tuple[int, dict[str, str], Any]:
        route = (method, *("{n}" if part.isdigit() else part for part in rest))
        if route == ("GET", "issues"):
            if repo.issues_disabled:
                return 410, {}, {"message": "Issues are disabled for this repo",
                                 "documentation_url": "https://docs.github.com/rest/issues/issues"}
            return self._list_issues(repo, query)
        if route == ("GET",):
            return 200, {}, {"id": 1, "name": repo.full_name.split("/")[1], "full_name": repo.full_name,
                             "url": f"{self.base_url}/repos/{repo.full_name}", "default_branch": "main"}
        if route[:2] == ("GET", "contents"):
            return self._contents(repo, "/".join(rest[1:]))
        if route == ("GET", "labels"):
            return 200, {}, [self._label(repo, name) for name in repo.labels]
        if route == ("POST", "labels"):  # as GitHub: 422 `already_exists` for a name it has, whatever its case
            if body["name"].casefold() in {name.casefold() for name in repo.labels}:
                return 422, {}, {"message": "Validation Failed",
                                 "errors": [{"resource": "Label", "code": "already_exists", "field": "name"}]}
            repo.labels.append(body["name"])
            repo.label_details[body["name"]] = {"color": body.get("color"), "description": body.get("description")}
            return 201, {}, self._label(repo, body["name"])
        if method == "GET" and len(rest) == 3 and rest[0] == "collaborators" and rest[2] == "permission":
            role = repo.permissions.get(rest[1])
            if role is None:
                return 404, {}, {"message": "Not Found"}
            # As GitHub answers: the role by name, and the legacy permission that folds maintain and triage away.
            return 200, {}, {"permission": LEGACY_PERMISSION.get(role, role), "role_name": role,
                             "user": {"login": rest[1], "type": "User"}}
        if route == ("GET", "issues", "comments", "{n}") and int(rest[2]) in self.comments:
            return 200, {}, _public(self.comments[int(rest[2])])
        if route == ("GET", "issues", "comments", "{n}", "reactions") and int(rest[2]) in self.comments:
            return 200, {}, list(self.comments[int(rest[2])].get("_reactions", []))
        if route == ("PATCH", "issues", "comments", "{n}") and int(rest[2]) in self.comments:
            comment = self.comments[int(rest[2])]
            comment["body"] = body["body"]
            return 200, {}, _public(comment)
        if len(rest) >= 2 and rest[0] == "issues" and rest[1].isdigit() and int(rest[1]) in repo.issues:
            return self._issue_route(repo, repo.issues[int(rest[1])], route[3:], method, body)
        return 404, {}, {"message": "Not Found"}

    def _issue_route(self, repo: FakeRepo, issue: dict[str, Any], rest: tuple[str, ...], method: str,
                     body: Any) -> tuple[int, dict[str, str], Any]:
        number = issue["number"]
        if (method, *rest) == ("GET",):
            return 200, {}, issue
        if (method, *rest) == ("GET", "comments"):
            # A comment marked `_unlisted` is not listed yet (GitHub's listing may lag a create).
            return 200, {}, [_public(c) for c in self.comments_on(repo.full_name, number) if not c.get("_unlisted")]
        if (method, *rest) == ("GET", "timeline"):
            return 200, {}, repo.timelines.get(number, [])
        if (method, *rest) == ("POST", "comments"):
            comment_id = self.add_comment(repo.full_name, number, body["body"], BOT_LOGIN, "Bot", via_app=self.app_id)
            return 201, {}, _public(self.comments[comment_id])
        if (method, *rest) == ("POST", "labels"):
            names = body if isinstance(body, list) else body.get("labels", [])
            unknown = [n for n in names if n not in repo.labels]
            if unknown:  # real GitHub would create them; the bot must never rely on that
                return 422, {}, {"message": f"labels {unknown} do not exist"}
            issue["labels"] += [self._label(repo, n) for n in names
                                if n not in {x["name"] for x in issue["labels"]}]
            return 200, {}, issue["labels"]
        return 404, {}, {"message": "Not Found"}

    def _contents(self, repo: FakeRepo, path: str) -> tuple[int, dict[str, str], Any]:
        if path not in repo.files:
            return 404, {}, {"message": "Not Found"}
        data = repo.files[path].encode()
        return 200, {}, {"type": "file", "encoding": "base64", "name": path.rsplit("/", 1)[-1], "path": path,
                         "size": len(data), "sha": "0" * 40, "content": base64.b64encode(data).decode(),
                         "url": f"{self.base_url}/repos/{repo.full_name}/contents/{path}"}

    def _label(self, repo: FakeRepo, name: str) -> dict[str, Any]:
        return {"id": abs(hash(name)) % 10**6, "name": name, "color": "ededed", "default": False,
                "url": f"{self.base_url}/repos/{repo.full_name}/labels/{name}"}

    def _comment_json(self, repo: str, number: int, comment_id: int, body: str, login: str,
                      kind: str) -> dict[str, Any]:
        return {"id": comment_id, "body": body, "_repo": repo, "_number": number,
                "user": {"login": login, "id": abs(hash(login)) % 10**6, "type": kind},
                "url": f"{self.base_url}/repos/{repo}/issues/comments/{comment_id}",
                "html_url": f"https://github.com/{repo}/issues/{number}#issuecomment-{comment_id}",
                "issue_url": f"{self.base_url}/repos/{repo}/issues/{number}",
                "created_at": "2024-05-01T12:00:00Z", "updated_at": "2024-05-01T12:00:00Z"}


    # --- the repository memory: issue listing, timelines, installation repositories, seeding ----------------

    def _list_issues(self, repo: FakeRepo, query: str) -> tuple[int, dict[str, str], Any]:
        """GET /repos/O/R/issues: state, since, sort=created, direction, page and per_page, with a Link header."""
        params = dict(parse_qsl(query))
        state = params.get("state", "open")
        issues = sorted(repo.issues.values(), key=lambda i: (i.get("created_at") or "", i["number"]),
                        reverse=params.get("direction", "desc") == "desc")
        issues = [i for i in issues if state == "all" or i.get("state", "open") == state]
        if "since" in params:
            since = params["since"].replace("+00:00", "Z")
            issues = [i for i in issues if (i.get("updated_at") or "") >= since]
        per_page = min(100, int(params.get("per_page", 30)))
        page = int(params.get("page", 1))
        chunk = issues[(page - 1) * per_page: page * per_page]
        return 200, _link_header(f"{self.base_url}/repos/{repo.full_name}/issues", params, page,
                                 -(-len(issues) // per_page)), chunk

    def _repo_installation(self, full_name: str, auth: str) -> tuple[int, dict[str, str], Any]:
        """GET /repos/O/R/installation, as the App (JWT): the installation that holds the repository."""
        try:
            jwt.decode(auth.removeprefix("Bearer "), self._public_key, algorithms=["RS256"])
        except jwt.PyJWTError as exc:
            return 401, {}, {"message": f"A JSON web token could not be decoded ({exc})"}
        if full_name not in self.repos:
            return 404, {}, {"message": "Not Found"}
        found = [i for i, names in self.installations.items() if full_name in names]
        return 200, {}, {"id": found[0] if found else 1, "app_id": self.app_id,
                         "account": {"login": full_name.split("/")[0]}}

    def _installation_repositories(self, auth: str, query: str) -> tuple[int, dict[str, str], Any]:
        installation = self.tokens[auth.partition(" ")[2]]
        names = self.installations.get(installation, sorted(self.repos))
        params = dict(parse_qsl(query))
        per_page, page = min(100, int(params.get("per_page", 30))), int(params.get("page", 1))
        chunk = names[(page - 1) * per_page: page * per_page]
        repos = [{"id": abs(hash(n)) % 10**6, "name": n.split("/")[1], "full_name": n,
                  "url": f"{self.base_url}/repos/{n}"} for n in chunk]
        return 200, _link_header(f"{self.base_url}/installation/repositories", params, page,
                                 -(-len(names) // per_page)), {"total_count": len(names), "repositories": repos}

    def seed_issues(self, full_name: str, count: int, start: int = 1, seed: int = 0,
                    area_labels: bool = False) -> list[dict[str, Any]]:
        """`count` made-up issues and pull requests, oldest first; some closed as completed (with the pull
        request that fixed them in the timeline), not planned, or as a duplicate of an earlier issue.
        Labels are one of the repository's at random, or with `area_labels` "area-<first word of the title>"
        (labels that follow the text, as maintainers' area labels do)."""
        rng = random.Random(seed)
        repo = self.repos[full_name]
        made = []
        for number in range(start, start + count):
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_600_000_000 + number * 3600))
            kind = rng.random()
            title, body = synthetic_issue(rng)
            issue: dict[str, Any] = {
                "number": number, "title": title, "body": body, "state": "open", "state_reason": None,
                "labels": [self._label(repo, n) for n in ([area_label(title)] if area_labels else
                                                          rng.sample(repo.labels, min(len(repo.labels), 1)))],
                "created_at": created, "updated_at": created, "closed_at": None,
                "html_url": f"https://github.com/{full_name}/issues/{number}",
                "user": {"login": "reporter", "id": 7, "type": "User"}}
            if kind < 0.1:
                issue["pull_request"] = {"url": f"{self.base_url}/repos/{full_name}/pulls/{number}",
                                         "merged_at": created}
            elif kind < 0.55 and number > start:
                reason = rng.choice(["completed", "not_planned", "duplicate"])
                self.close_issue(full_name, issue, reason, fixed_by=number + 10_000 if reason == "completed" else None,
                                 duplicate_of=rng.randrange(start, number))
            self.put_issue(full_name, issue)
            made.append(issue)
        return made

    def put_issue(self, full_name: str, issue: dict[str, Any]) -> dict[str, Any]:
        repo = self.repos[full_name]
        issue["url"] = f"{self.base_url}/repos/{full_name}/issues/{issue['number']}"
        issue["comments_url"] = issue["url"] + "/comments"
        issue.setdefault("labels", [])
        repo.issues[issue["number"]] = issue
        return issue

    def close_issue(self, full_name: str, issue: dict[str, Any], reason: str, fixed_by: int | None = None,
                    duplicate_of: int | None = None) -> None:
        """Close an issue as GitHub would, with the timeline events that say how."""
        issue.update(state="closed", state_reason=reason, closed_at=issue.get("created_at"))
        events: list[dict[str, Any]] = []
        if fixed_by is not None:
            events.append({"event": "cross-referenced", "source": {"type": "issue", "issue": {
                "number": fixed_by, "title": "fix", "state": "closed",
                "pull_request": {"merged_at": issue["closed_at"]}, "repository": {"full_name": full_name}}}})
        if reason == "duplicate" and duplicate_of is not None:
            events.append({"event": "marked_as_duplicate", "source": {"type": "issue", "issue": {
                "number": duplicate_of}}})
        events.append({"event": "closed", "commit_id": None, "state_reason": reason})
        self.repos[full_name].timelines[issue["number"]] = events


SUBJECTS = ["NCCL all_reduce", "ZeRO stage 3 checkpoint", "FSDP wrap policy", "pipeline parallel schedule",
            "tensor parallel linear", "gradient accumulation", "fp16 loss scaler", "activation checkpointing",
            "dataloader workers", "elastic launcher", "CUDA graph capture", "optimizer offload"]
PROBLEMS = ["hangs after a few steps", "runs out of GPU memory", "raises a shape mismatch",
            "fails to build with the CUDA extension", "gives NaN loss", "is slower than expected",
            "crashes with a segmentation fault", "loads the wrong weights", "times out on multiple nodes"]
CONTEXT = ["on 8 A100 GPUs", "with torch 2.1 and CUDA 12.1", "on two nodes over InfiniBand",
           "with bf16 enabled", "after upgrading to the latest release", "only when resuming from a checkpoint"]


def synthetic_issue(rng: random.Random) -> tuple[str, str]:
    """A made-up issue title and body (no real issue text is ever copied into the repository)."""
    subject, problem, context = rng.choice(SUBJECTS), rng.choice(PROBLEMS), rng.choice(CONTEXT)
    title = f"{subject} {problem} {context}"
    body = (f"When I use {subject} my job {problem} {context}. Steps: launch with the usual script, wait "
            f"{rng.randint(1, 500)} steps. Expected training to continue. Seed {rng.randint(0, 10**6)}.")
    return title, body


def area_label(title: str) -> str:
    return f"area-{title.split()[0].lower()}"


def _link_header(url: str, params: dict[str, str], page: int, last: int) -> dict[str, str]:
    """GitHub's Link header (next and last) for page `page` of `last`."""
    if page >= last:
        return {}
    links = [(page + 1, "next"), (last, "last")]
    return {"Link": ", ".join(f'<{url}?{urlencode(params | {"page": str(n)})}>; rel="{rel}"' for n, rel in links)}


def _public(comment: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in comment.items() if not k.startswith("_")}


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            path, _, query = self.path.partition("?")
            hold = fake._take_hold(self.command, path)
            if hold is not None and not hold.after:
                hold.wait()
                if hold.dropped:
                    self.close_connection = True
                    return
            status, headers, payload = fake.answer(self.command, path, query, body,
                                                   self.headers.get("Authorization", ""))
            if hold is not None and hold.after:
                hold.wait()
            if status == DROP:
                self.close_connection = True
                self.connection.close()
                return
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def github_holding(**repo: Any) -> Iterator[FakeGitHub]:
    """A running fake GitHub with REPO (`repo` as for `add_repo`); on exit, checks nothing destructive was sent."""
    with FakeGitHub().running() as fake:
        fake.add_repo(REPO, **repo)
        yield fake
        fake.assert_nothing_destructive()


# --- the webhook direction: driving the service as GitHub does -----------------------------------------------


def app_settings_for(settings: Settings, github: FakeGitHub, db_dir: Path, **overrides: Any) -> Settings:
    """`settings` acting as the fake's App, with a fresh database in `db_dir` and short waits."""
    update: dict[str, Any] = {
        "webhook_secret": SecretStr(SECRET), "github_app_id": github.app_id,
        "github_private_key": SecretStr(github.private_key), "github_api_url": github.base_url,
        "database_url": SecretStr(f"sqlite:///{db_dir / 'service.sqlite3'}"), "worker_poll_s": 0.02,
        "write_interval_s": 0.0, "max_attempts": 4, "retry_base_s": 0.05, "retry_max_s": 2.0,
        "job_lease_s": 1.0, "ops_token": SecretStr(OPS_TOKEN)}
    if isinstance(overrides.get("database_url"), str):  # a secret in the Settings, as from the environment
        overrides["database_url"] = SecretStr(overrides["database_url"])
    return settings.model_copy(update=update | overrides)


@contextmanager
def running_service(settings: Settings, engine: Engine | None, client: tuple[str, int] = ("127.0.0.1", 50000),
                    **options: Any) -> Iterator[TestClient]:
    """The real app (lifespan, worker and all) with the session's engine injected; requests come from
    `client` (loopback by default) with the ops bearer token of `app_settings_for`."""
    with TestClient(create_app(settings, engine=engine, options=replace(FAST, **options)), client=client,
                    headers={"Authorization": f"Bearer {OPS_TOKEN}"}) as client:
        yield client


def state_of(client: TestClient) -> ServiceState:
    state: ServiceState = client.app.state.service  # type: ignore[attr-defined]
    return state


def deliver(client: TestClient, payload: dict[str, Any] | bytes, event: str = "issues",
            delivery_id: str | None = None, secret: str | None = SECRET) -> Any:
    """POST a delivery as GitHub would (signed with `secret`; unsigned when it is None)."""
    body, headers = signed_delivery(payload, event, secret, delivery_id)
    return client.post("/webhook", content=body, headers=headers)


# Generous: what the tests wait for takes a second or two, but a machine shared with other work can be slow.
WAIT_S = 120.0


def wait_until(condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def wait_idle(client: TestClient, timeout: float = WAIT_S) -> dict[str, int]:
    """Wait until no job is queued or running; the job counts by status."""
    store = state_of(client).store
    wait_until(lambda: not {"queued", "running"} & set(store.job_counts()), timeout)
    return store.job_counts()


def issue_payload(github: FakeGitHub, name: str = "issues-opened", number: int = 42,
                  **issue: Any) -> dict[str, Any]:
    """A delivery about issue `number`, with the fake's API agreeing about that issue."""
    payload = load_payload(name)
    repo = payload["repository"]["full_name"]
    payload["issue"].update(number=number, html_url=f"https://github.com/{repo}/issues/{number}", **issue)
    github.add_issue(payload)
    return payload


def load_payload(name: str) -> dict[str, Any]:
    """A hand-made delivery body from tests/payloads (real GitHub shapes, made-up text)."""
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def signed_delivery(payload: dict[str, Any] | bytes, event: str, secret: str | None,
                    delivery_id: str | None = None) -> tuple[bytes, dict[str, str]]:
    """The body and headers GitHub would send for `payload`."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": event,
               "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()), "User-Agent": "GitHub-Hookshot/test"}
    if secret is not None:
        headers["X-Hub-Signature-256"] = sign_body(secret, body)
    return body, headers
