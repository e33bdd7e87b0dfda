"""The front door, `POST /webhook`: verify, record, acknowledge, hand off. No triage happens here."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from bot.service.commands import parse_command
from bot.service.credentials import webhook_secret
from bot.service.errors import MalformedPayload, PayloadTooLarge, SignatureError, StoreBusy
from bot.service.events import WebhookEvent
from bot.service.github import parse_event, payload_action
from bot.service.jobs import ROUTER
from bot.service.logs import bind_delivery
from bot.service.metrics import event_label
from bot.service.signature import verify_signature
from bot.service.state import ServiceState, StateDep

log = logging.getLogger(__name__)

router = APIRouter()


@router.post("/webhook", status_code=202)
async def receive_webhook(request: Request, state: StateDep) -> JSONResponse:
    """Store a verified delivery under its id and answer 202; the worker does the rest."""
    delivery_id = request.headers.get("x-github-delivery", "")
    event_name = request.headers.get("x-github-event", "")
    with bind_delivery(delivery_id or None):
        body = await read_body(request, state.settings.max_body_bytes)
        check_signature(state, body, request.headers.get("x-hub-signature-256"))
        if not delivery_id or not event_name:
            raise MalformedPayload("the X-GitHub-Delivery and X-GitHub-Event headers are required")
        if event_name == "ping":
            return _answer(state, event_name, "pong", 200)
        payload = parse_json(body)
        action = payload_action(payload)
        if not ROUTER.handles(event_name, action):
            log.info("ignoring %s.%s: not an event the bot handles", event_name, action or "-")
            return _answer(state, event_name, "ignored", 202)
        event = parse_event(event_name, payload)
        reason = ignore_reason(event)
        if reason:
            log.info("ignoring %s.%s on %s: %s", event_name, action, event.issue_key, reason)
            return _answer(state, event_name, "ignored", 202, reason)
        new, job_id = await record(state, delivery_id, event_name, action, body.decode("utf-8"), event.issue_key)
        if job_id is not None:
            state.wake_worker.set()
        status = "queued" if new else "requeued" if job_id is not None else "duplicate"
        log.info("delivery %s: %s.%s on %s", status, event_name, action, event.issue_key,
                 extra={"job": job_id})
        return _answer(state, event_name, status, 202 if job_id is not None else 200)


async def record(state: ServiceState, delivery_id: str, event: str, action: str, payload: str,
                 issue_key: str) -> tuple[bool, int | None]:
    """Insert the delivery and its job, waiting at most `ack_timeout_s`: a slow or broken store is a 503."""
    def insert() -> tuple[bool, int | None]:
        intake = state.take_intake()
        try:
            return intake.record_delivery(delivery_id, event, action, payload, issue_key)
        finally:
            state.give_intake(intake)

    try:
        if state.intake is not None and not state.intake.postgres:
            # SQLite: one tiny local INSERT, run right here (a thread hop costs more than the write); its
            # short busy timeout bounds how long a held write lock can stall the loop.
            return insert()
        return await asyncio.wait_for(run_in_threadpool(insert), timeout=state.settings.ack_timeout_s)
    except TimeoutError:
        raise StoreBusy(f"the database did not answer within {state.settings.ack_timeout_s:g}s") from None
    except Exception as exc:  # locked, unreachable, disk full: GitHub keeps the delivery as failed
        log.error("cannot store the delivery: %s", exc)
        raise StoreBusy(f"the database cannot store the delivery now ({type(exc).__name__})") from None


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it is known to pass `limit` (before reading it all)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body has {int(declared)} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body passes the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def check_signature(state: ServiceState, body: bytes, header: str | None) -> None:
    """401 unless the body is signed with the webhook secret (skipped only in shadow mode without one)."""
    secret = webhook_secret(state.settings)
    if secret is None and state.settings.shadow:
        return
    if secret is None or not verify_signature(secret, body, header):
        raise SignatureError("missing or invalid X-Hub-Signature-256")


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body.decode("utf-8"))
    except RecursionError:
        raise MalformedPayload("the body nests arrays or objects too deeply to parse") from None
    except ValueError as exc:  # not UTF-8, not JSON, or an integer of more than 4,300 digits
        raise MalformedPayload(f"the body is not JSON: {str(exc)[:200]}") from None
    if not isinstance(payload, dict):
        raise MalformedPayload("the body is JSON but not an object")
    return payload


def ignore_reason(event: WebhookEvent) -> str | None:
    """Why a parsed delivery needs no job: bots, pull requests, comments that are no command."""
    if event.sender_is_bot:
        return "sent by a bot"
    if event.is_pull_request:
        return "a pull request"
    if event.comment is not None and parse_command(event.comment.body) is None:
        return "a comment without a /triage command"
    return None


def _answer(state: ServiceState, event: str, status: str, code: int,
            reason: str | None = None) -> JSONResponse:
    state.metrics.deliveries.labels(event=event_label(event), outcome=status).inc()
    content = {"status": status} | ({"reason": reason} if reason else {})
    return JSONResponse(content, status_code=code)
