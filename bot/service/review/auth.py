"""Who sees the review page: sign-in with GitHub (the App's OAuth) or with the ops token, the session cookie
(HttpOnly, SameSite=Lax, Secure behind TLS), the CSRF token every POST carries, and the page's off switch
(404 unless the OAuth client or the ops token is configured)."""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from bot.service.github import oauth
from bot.service.review import sessions
from bot.service.review.records import reviewed_repos
from bot.service.review.rendering import page
from bot.service.review.sessions import COOKIE, LOGIN_COOKIE, ReviewSession
from bot.service.state import ServiceState

MAX_FORM_BYTES = 64 * 1024
LOGIN_TTL_S = 600


def service(request: Request) -> ServiceState:
    state: ServiceState | None = getattr(request.app.state, "service", None)
    if state is None:
        raise HTTPException(status_code=503, detail="the service is starting")
    return state


async def require_enabled(request: Request) -> None:
    """404, as if the page did not exist, unless someone could sign in."""
    if not oauth.review_enabled(service(request).settings):
        raise HTTPException(status_code=404, detail="Not Found")


router = APIRouter(prefix="/review", dependencies=[Depends(require_enabled)], include_in_schema=False)


@dataclass
class Signed:
    """The signed-in session of a request, with its cookie's id."""

    id: str
    session: ReviewSession


def base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/") + "/review"


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    """Every cookie of the page: HttpOnly, SameSite=Lax, Secure when the request came over TLS."""
    response.set_cookie(name, value, max_age=max_age, path=base(request), httponly=True,
                        secure=request.url.scheme == "https", samesite="lax")


async def signed_in(request: Request) -> Signed | None:
    """The request's live session; a user's roles are read again with their token once they are old."""
    state = service(request)
    session_id = request.cookies.get(COOKIE)
    session = await run_in_threadpool(sessions.find_session, state.store, session_id)
    if session is None or session_id is None:
        return None
    if session.token and time.time() - session.checked_at > state.settings.review_recheck_s:
        known = await run_in_threadpool(reviewed_repos, state.store)
        try:
            repos = await run_in_threadpool(oauth.triage_repos, state.settings, session.token, session.login, known)
        except oauth.SignInFailed:
            repos = []
        await run_in_threadpool(sessions.recheck_session, state.store, session_id, repos)
        session = session.model_copy(update={"repos": repos, "checked_at": time.time()})
    return Signed(session_id, session)


async def form_of(request: Request, csrf: str) -> dict[str, str]:
    """The POSTed form (urlencoded), refused (403) unless it carries the CSRF token `csrf`."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(status_code=413, detail="form too large")
    form = {key: values[-1] for key, values in parse_qs(body.decode("utf-8", errors="replace")).items()}
    if not csrf or not hmac.compare_digest(form.get("csrf", "").encode(), csrf.encode()):
        raise HTTPException(status_code=403, detail="missing or wrong CSRF token; reload the page and try again")
    return form


def _login_token(request: Request) -> str:
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)


@router.get("/login")
async def login_page(request: Request) -> Response:
    settings = service(request).settings
    token = _login_token(request)
    response = page(request, "login.html", base=base(request), csrf=token, oauth=oauth.oauth_enabled(settings),
                    ops=settings.ops_token is not None, error=None)
    set_cookie(request, response, LOGIN_COOKIE, token, LOGIN_TTL_S)
    return response


@router.get("/login/github")
async def login_github(request: Request) -> Response:
    """To GitHub's authorize page; `state` is the sign-in cookie's random value, checked at the callback."""
    settings = service(request).settings
    if not oauth.oauth_enabled(settings):
        raise HTTPException(status_code=404, detail="sign-in with GitHub is not configured")
    state = _login_token(request)
    response = RedirectResponse(oauth.authorize_url(settings, _callback_url(request), state), status_code=303)
    set_cookie(request, response, LOGIN_COOKIE, state, LOGIN_TTL_S)
    return response


@router.get("/callback")
async def callback(request: Request, code: str = "", state: str = "") -> Response:
    """GitHub sends the user back with a code: a token for it, who they are, where their role may triage."""
    service_state = service(request)
    settings = service_state.settings
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not oauth.oauth_enabled(settings):
        raise HTTPException(status_code=404, detail="sign-in with GitHub is not configured")
    if not code or not expected or not hmac.compare_digest(state.encode(), expected.encode()):
        raise HTTPException(status_code=400, detail="the sign-in's state does not match; sign in again")
    try:
        token = await run_in_threadpool(oauth.exchange_code, settings, code, _callback_url(request))
        login = await run_in_threadpool(oauth.user_login, settings, token)
        known = await run_in_threadpool(reviewed_repos, service_state.store)
        repos = await run_in_threadpool(oauth.triage_repos, settings, token, login, known)
    except oauth.SignInFailed as exc:
        raise HTTPException(status_code=502, detail=str(exc)) from None
    return await _open(request, login, operator=False, token=token, repos=repos)


@router.post("/login/ops")
async def login_ops(request: Request) -> Response:
    """The ops token signs an operator in to every repository."""
    settings = service(request).settings
    form = await form_of(request, request.cookies.get(LOGIN_COOKIE, ""))
    ops = settings.ops_token.get_secret_value() if settings.ops_token else ""
    if not ops or not hmac.compare_digest(form.get("token", "").encode(), ops.encode()):
        response = page(request, "login.html", base=base(request), csrf=form["csrf"],
                        oauth=oauth.oauth_enabled(settings), ops=bool(ops), error="That is not the ops token.")
        response.status_code = 403
        return response
    return await _open(request, "operator", operator=True, token=None, repos=None)


@router.post("/logout")
async def logout(request: Request) -> Response:
    signed = await signed_in(request)
    if signed is None:
        return RedirectResponse(f"{base(request)}/login", status_code=303)
    await form_of(request, signed.session.csrf)
    await run_in_threadpool(sessions.close_session, service(request).store, signed.id)
    response = RedirectResponse(f"{base(request)}/login", status_code=303)
    response.delete_cookie(COOKIE, path=base(request))
    return response


async def _open(request: Request, login: str, *, operator: bool, token: str | None,
                repos: list[str] | None) -> Response:
    state = service(request)
    ttl_s = state.settings.review_session_hours * 3600
    session_id, _ = await run_in_threadpool(sessions.open_session, state.store, login, operator=operator,
                                            token=token, repos=repos, ttl_s=ttl_s)
    response = RedirectResponse(base(request), status_code=303)
    set_cookie(request, response, COOKIE, session_id, int(ttl_s))
    response.delete_cookie(LOGIN_COOKIE, path=base(request))
    return response


def _callback_url(request: Request) -> str:
    return str(request.url_for("callback"))
