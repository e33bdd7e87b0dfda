"""What the web process needs of the engine's world without loading the engine: the taxonomy (to check a
correction and offer its values) and a decision's issue as its delivery showed it."""

from __future__ import annotations

import json
from functools import cache

from bot.knowledge.taxonomy import Taxonomy, load_taxonomy
from bot.service.decisions.models import Decision
from bot.service.github.models import WebhookEvent
from bot.service.github.payloads import parse_event
from bot.service.queue.store import Store


@cache
def review_taxonomy(name: str) -> Taxonomy:
    return load_taxonomy(name)


def event_of(store: Store, decided: Decision) -> WebhookEvent | None:
    """The decision's delivery parsed again (the issue's title and body for a correction), or None once
    retention has deleted it."""
    try:
        payload = json.loads(store.delivery_payload(decided.delivery_id))
    except KeyError:
        return None
    return parse_event(decided.event, payload)
