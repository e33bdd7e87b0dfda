"""The front door, `POST /webhook`: verify, record, acknowledge, hand off. No triage happens here."""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.deciding.shadow import unsigned_deliveries_allowed
from bot.service.errors import MalformedPayload, PayloadTooLarge, SignatureError
from bot.service.github.credentials import webhook_secret
from bot.service.github.models import WebhookEvent
from bot.service.github.payloads import parse_event, payload_action
from bot.service.handlers.commands import parse_command
from bot.service.handlers.dispatch import ROUTER
from bot.service.logs import bind_delivery
from bot.service.metrics import event_label
from bot.service.queue.deliveries import NewDelivery, Recorded
from bot.service.state import ServiceState
from bot.service.web.signature import verify_signature

log = logging.getLogger(__name__)

async def receive_webhook(request: Request) -> Response:
    """Store a verified delivery under its id and answer 202; the worker does the rest."""
    state: ServiceState = request.app.state.service  # not a dependency: FastAPI's resolution costs the ack
    delivery_id = request.headers.get("x-github-delivery", "")
    event_name = request.headers.get("x-github-event", "")
    with bind_delivery(delivery_id or None):
        signature = request.headers.get("x-hub-signature-256")
        if not signature and signature_required(state):  # refused before a byte of the body is read
            raise SignatureError("missing X-Hub-Signature-256")
        body = await read_body(request, state.settings.max_body_bytes)
        check_signature(state, body, signature)
        admitted = admit(state, delivery_id, event_name, body)
        if isinstance(admitted, Response):
            return admitted
        new, job_id = await record(state, admitted)
        if job_id is not None:
            state.wake_worker.set()
        status = "queued" if new else "requeued" if job_id is not None else "duplicate"
        # DEBUG: a line per delivery would cost the ack a fifth of its time; the worker logs each job with
        # this delivery's id, refusals are logged as warnings and /metrics counts every outcome.
        log.debug("delivery %s: %s.%s on %s", status, event_name, admitted.action, admitted.issue_key,
                  extra={"job": job_id})
        return _answer(state, event_name, status, 202 if job_id is not None else 200)


def admit(state: ServiceState, delivery_id: str, event_name: str, body: bytes) -> NewDelivery | Response:
    """The delivery to store, or the answer for one that needs no job; raises DeliveryRejected if malformed.

    Synchronous on purpose: the parsed payload is freed before the request waits for the database (200
    parsed payloads kept alive across that wait made the garbage collector's work grow with the load).
    """
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
    return NewDelivery(delivery_id, event_name, action, body.decode("utf-8"), event.issue_key)


# A plain Starlette route, not a FastAPI one: no dependency resolution or response model on the hot path
# (FastAPI's own route machinery cost the acknowledgement more than all of the handler's work).
route = Route("/webhook", receive_webhook, methods=["POST"], name="webhook")


async def record(state: ServiceState, delivery: NewDelivery) -> Recorded:
    """Store the delivery and its job, waiting at most `ack_timeout_s`: a slow or broken store is a 503."""
    if state.intake is None:  # no intake writer (an app built without its lifespan): a plain transaction
        return state.store.record_delivery(delivery.delivery_id, delivery.event, delivery.action,
                                           delivery.payload, delivery.issue_key)
    return await state.intake.record(delivery)


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


def signature_required(state: ServiceState) -> bool:
    """Whether deliveries must be signed: unsigned bodies pass only where shadow mode allows them (no secret,
    no App credentials) and this process holds no App client."""
    return not (webhook_secret(state.settings) is None and unsigned_deliveries_allowed(state.settings)
                and state.github is None)


def check_signature(state: ServiceState, body: bytes, header: str | None) -> None:
    """401 unless the body is signed with the webhook secret (see `signature_required`)."""
    secret = webhook_secret(state.settings)
    if not signature_required(state):
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


def _answer(state: ServiceState, event: str, status: str, code: int, reason: str | None = None) -> Response:
    state.metrics.deliveries.labels(event=event_label(event), outcome=status).inc()
    content = {"status": status} | ({"reason": reason} if reason else {})
    return Response(json.dumps(content).encode(), status_code=code, media_type="application/json")
