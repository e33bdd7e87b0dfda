"""Webhook payloads: GitHub's JSON shapes parsed into domain events, every field checked for type and range; and
the fields the service reads of a stored delivery (its repositories, installation, a transfer's target). The
issue JSON the memory keeps is read in `issues.py`. No other package reads GitHub's JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from bot.core.domain import Issue
from bot.service.errors import MalformedPayload, PayloadFieldError
from bot.service.github.models import Comment, WebhookEvent

MAX_ID = 2**53  # ids and numbers beyond this are no GitHub's (and would overflow the database's integers)


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
        issue_labels=_label_names(issue.get("labels")), author_association=_association(issue),
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
                 number=number, url=issue.get("html_url"), created_at=github_time(issue.get("created_at")))


def github_time(value: object) -> datetime | None:
    """GitHub's ISO 8601 time ("2024-05-01T12:00:00Z") as an aware UTC datetime; None when absent or unreadable
    (the date only keeps later issues out of the comment: a bad one costs that filter, never the delivery)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _association(issue: dict[str, Any]) -> str | None:
    """The issue author's `author_association`; anything but a short word counts as unknown."""
    value = issue.get("author_association")
    return value.upper() if isinstance(value, str) and value.isascii() and 0 < len(value) <= 40 else None


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


REPO_LISTS = ("repositories", "repositories_added", "repositories_removed")  # an installation delivery's lists
REPARSE_FIELDS = ("action", "installation", "sender")  # what parsing an installation delivery again needs


def repository_names(payload: dict[str, Any], key: str) -> list[str]:
    """The full names an installation payload lists under `key` (one of REPO_LISTS)."""
    return [str(r["full_name"]) for r in payload.get(key) or [] if isinstance(r, dict) and "full_name" in r]


def added_repositories(event: str, payload: dict[str, Any]) -> list[str]:
    """The repositories an `installation` (all it lists) or `installation_repositories` delivery adds."""
    return repository_names(payload, "repositories" if event == "installation" else "repositories_added")


def removed_repositories(event: str, payload: dict[str, Any]) -> list[str]:
    """The repositories an `installation` (deleted: all it lists) or `installation_repositories` delivery
    removes."""
    return repository_names(payload, "repositories" if event == "installation" else "repositories_removed")


def reparse_fields(payload: dict[str, Any]) -> dict[str, Any]:
    """Only what parsing the delivery again needs (action, installation, sender): no repository, no text."""
    sender = payload.get("sender") or {}
    return {"action": payload.get("action", ""), "installation": payload.get("installation"),
            "sender": {"login": sender.get("login", ""), "type": sender.get("type", "User")}}


def transfer_target(payload: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """An `issues.transferred` delivery's new repository (its full name, "" when absent) and the issue's JSON
    there (None when absent)."""
    changes = payload.get("changes") or {}
    new_issue = changes.get("new_issue")
    return full_name(changes.get("new_repository")), new_issue if isinstance(new_issue, dict) else None


def named_repositories(payload_text: str) -> set[str]:
    """The repositories a stored delivery is about: its repository, an installation's lists, a transfer's
    target (none for text that is not a JSON object)."""
    try:
        data = json.loads(payload_text)
    except ValueError:
        return set()
    if not isinstance(data, dict):
        return set()
    names = {full_name(data.get("repository"))}
    for key in REPO_LISTS:
        names |= {full_name(item) for item in data.get(key) or [] if isinstance(data.get(key), list)}
    changes = data.get("changes")
    if isinstance(changes, dict):
        names.add(full_name(changes.get("new_repository")))
    return names - {""}


def installation_of(payload_text: str) -> int | None:
    """The installation id of a stored delivery, None when it names none."""
    installation: Any = (json.loads(payload_text).get("installation") or {}).get("id")
    return installation if isinstance(installation, int) else None


def full_name(value: object) -> str:
    """A repository object's `full_name` ("" when it is not one)."""
    return str(value.get("full_name") or "") if isinstance(value, dict) else ""
