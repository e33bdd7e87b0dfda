"""Review sessions, kept server-side in the service database (every web process of `serve` sees them): the
browser holds only a random id, the database only its SHA-256. A session names who signed in, the repositories
they may see (None: an operator, every one), their GitHub token (to check their role again) and its CSRF token."""

from __future__ import annotations

import hashlib
import json
import secrets
import time

from pydantic import BaseModel

from bot.service.queue.store import Store

COOKIE = "ddl_triage_review"
LOGIN_COOKIE = "ddl_triage_review_login"  # the OAuth state / the sign-in form's CSRF token, before a session


class ReviewSession(BaseModel):
    login: str
    operator: bool
    token: str | None  # the user's GitHub token (user-to-server); None for an operator
    repos: list[str] | None  # the repositories their role may triage; None: every one (an operator)
    csrf: str
    checked_at: float
    expires_at: float

    def may_see(self, repo: str) -> bool:
        return self.repos is None or repo in self.repos


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(store: Store, login: str, *, operator: bool, token: str | None, repos: list[str] | None,
                 ttl_s: float) -> tuple[str, ReviewSession]:
    """A new session; returns the id for the cookie (stored only hashed) and the session."""
    session_id = secrets.token_urlsafe(32)
    now = time.time()
    session = ReviewSession(login=login, operator=operator, token=token, repos=repos,
                            csrf=secrets.token_urlsafe(32), checked_at=now, expires_at=now + ttl_s)
    with store.transaction() as run:
        run("DELETE FROM review_sessions WHERE expires_at < ?", (now,))
        run("INSERT INTO review_sessions (id_hash, login, operator, token, repos, csrf, checked_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (_hash(session_id), login, int(operator), token, json.dumps(repos), session.csrf, now,
             session.expires_at))
    return session_id, session


def find_session(store: Store, session_id: str | None) -> ReviewSession | None:
    """The live session of a cookie's id, or None (none, unknown or expired)."""
    if not session_id:
        return None
    with store.transaction() as run:
        row = run("SELECT login, operator, token, repos, csrf, checked_at, expires_at FROM review_sessions "
                  "WHERE id_hash = ?", (_hash(session_id),)).fetchone()
    if row is None or float(row[6]) < time.time():
        return None
    return ReviewSession(login=row[0], operator=bool(row[1]), token=row[2], repos=json.loads(row[3]), csrf=row[4],
                         checked_at=float(row[5]), expires_at=float(row[6]))


def recheck_session(store: Store, session_id: str, repos: list[str]) -> None:
    """The repositories a user may see, checked again now."""
    with store.transaction() as run:
        run("UPDATE review_sessions SET repos = ?, checked_at = ? WHERE id_hash = ?",
            (json.dumps(repos), time.time(), _hash(session_id)))


def close_session(store: Store, session_id: str | None) -> None:
    if session_id:
        with store.transaction() as run:
            run("DELETE FROM review_sessions WHERE id_hash = ?", (_hash(session_id),))
