"""The review page's views and actions: the repositories a person may review, a repository's queue and its
summary; Post a shadow decision's comment, Correct an axis, Useful / Not useful. Every view and action of a
repository checks the session may see it, and every decision acted on must be of that repository (else 404:
the page says nothing of another repository, not even that it exists)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import HTTPException, Query, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from bot.service.decisions.models import Decision
from bot.service.handlers.feedback import record_corrections, validate_corrections
from bot.service.review import records
from bot.service.review.auth import Signed, base, form_of, router, service, signed_in
from bot.service.review.posting import queue_post
from bot.service.review.queue_view import queue_context, summary_context
from bot.service.review.rendering import page
from bot.service.review.taxonomy import event_of, review_taxonomy

NOTICES = {"post": "Queued: the comment is posted by the worker in a moment (edited in place if one is there).",
           "posted": "This comment was posted already.", "correct": "Correction stored; it is learned at the next "
           "triage.", "rate": "Thank you: rating stored."}


async def _signed_or_login(request: Request) -> Signed | Response:
    signed = await signed_in(request)
    return signed if signed is not None else RedirectResponse(f"{base(request)}/login", status_code=303)


def _repo(signed: Signed, owner: str, name: str) -> str:
    repo = f"{owner}/{name}"
    if not signed.session.may_see(repo):
        raise HTTPException(status_code=404, detail="Not Found")
    return repo


@router.get("")
async def repositories(request: Request) -> Response:
    signed = await _signed_or_login(request)
    if isinstance(signed, Response):
        return signed
    known = await run_in_threadpool(records.reviewed_repos, service(request).store)
    visible = [repo for repo in known if signed.session.may_see(repo)]
    return page(request, "repos.html", base=base(request), session=signed.session, repos=visible)


@router.get("/{owner}/{name}")
async def queue(request: Request, owner: str, name: str, outcome: str = "", axis: str = "", value: str = "",
                limit: Annotated[int, Query(ge=1, le=1000)] = 200, notice: str = "") -> Response:
    signed = await _signed_or_login(request)
    if isinstance(signed, Response):
        return signed
    repo = _repo(signed, owner, name)
    state = service(request)
    context = await run_in_threadpool(queue_context, state, repo, outcome, axis, value, limit)
    return page(request, "queue.html", base=base(request), session=signed.session, repo=repo,
                notice=NOTICES.get(notice), **context)


@router.get("/{owner}/{name}/summary")
async def summary(request: Request, owner: str, name: str) -> Response:
    signed = await _signed_or_login(request)
    if isinstance(signed, Response):
        return signed
    repo = _repo(signed, owner, name)
    context = await run_in_threadpool(summary_context, service(request), repo)
    return page(request, "summary.html", base=base(request), session=signed.session, repo=repo, **context)


async def _action(request: Request, owner: str, name: str) -> tuple[Signed, Decision, dict[str, str]]:
    """The session (else 403), its repository, the CSRF-checked form and the decision it names (404 unless
    the decision is of this repository)."""
    signed = await signed_in(request)
    if signed is None:
        raise HTTPException(status_code=403, detail="sign in first")
    repo = _repo(signed, owner, name)
    form = await form_of(request, signed.session.csrf)
    decided = await run_in_threadpool(records.decision, service(request).store, form.get("decision", ""))
    if decided is None or decided.repo != repo:
        raise HTTPException(status_code=404, detail="no such decision on this repository")
    return signed, decided, form


def _back(request: Request, decided: Decision, notice: str) -> Response:
    return RedirectResponse(f"{base(request)}/{decided.repo}?notice={notice}#issue-{decided.number}", status_code=303)


@router.post("/{owner}/{name}/post")
async def post(request: Request, owner: str, name: str) -> Response:
    """Post a shadow decision's comment: a job the worker runs like a live post (one comment, by its marker)."""
    signed, decided, _ = await _action(request, owner, name)
    if decided.posted:
        return _back(request, decided, "posted")
    if decided.comment is None:
        raise HTTPException(status_code=409, detail="this decision stayed silent: there is no comment to post")
    state = service(request)
    if state.github is None:
        raise HTTPException(status_code=409, detail="this service has no App credentials: it cannot post")
    await run_in_threadpool(queue_post, state, decided, signed.session.login)
    return _back(request, decided, "post")


@router.post("/{owner}/{name}/correct")
async def correct(request: Request, owner: str, name: str) -> Response:
    """Correct an axis: stored as a `/triage axis=value` correction is (a labelled case, learned at the next
    triage), with no comment on the issue."""
    signed, decided, form = await _action(request, owner, name)
    state = service(request)
    corrections, problems = validate_corrections({form.get("axis", ""): form.get("value", "")},
                                                 review_taxonomy(state.settings.taxonomy))
    if problems:
        raise HTTPException(status_code=422, detail="; ".join(problems))
    event = await run_in_threadpool(event_of, state.store, decided)
    if event is None:
        raise HTTPException(status_code=410, detail="the issue's delivery is no longer stored (retention); "
                                                    "correct it with /triage on the issue")
    await run_in_threadpool(record_corrections, state.store, f"review-{uuid.uuid4()}", event,
                            signed.session.login, corrections)
    return _back(request, decided, "correct")


@router.post("/{owner}/{name}/rate")
async def rate(request: Request, owner: str, name: str) -> Response:
    signed, decided, form = await _action(request, owner, name)
    if form.get("useful") not in ("1", "0"):
        raise HTTPException(status_code=422, detail="useful must be 1 or 0")
    await run_in_threadpool(records.rate, service(request).store, decided, signed.session.login,
                            form["useful"] == "1")
    return _back(request, decided, "rate")
