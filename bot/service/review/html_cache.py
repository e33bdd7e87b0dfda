"""Each decision's comment as sanitised HTML, rendered once and kept in the service database (`comment_html`):
rendering is ~4 ms a comment, so the worker renders it when it stores the decision and the queue reads it back
(every web process alike, across restarts); a comment without its HTML yet is rendered at its first view."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from bot.service.decisions.models import Decision
from bot.service.queue.store import Store
from bot.service.review.view import render_markdown

CHUNK = 500  # ids per query (SQLite's bound on parameters is far above)


def _digest(comment: str) -> str:
    return hashlib.sha256(comment.encode()).hexdigest()[:32]


def comment_html(store: Store, decisions: Sequence[Decision]) -> dict[str, str]:
    """The HTML of every decision that has a comment, by delivery id; missing or stale ones rendered and kept."""
    wanted = {d.delivery_id: d for d in decisions if d.comment is not None}
    found: dict[str, str] = {}
    ids = list(wanted)
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        with store.transaction() as run:
            rows = run(f"SELECT delivery_id, digest, html FROM comment_html WHERE delivery_id IN "
                       f"({', '.join('?' * len(chunk))})", chunk).fetchall()
        for delivery_id, digest, html in rows:
            if digest == _digest(wanted[delivery_id].comment or ""):
                found[str(delivery_id)] = str(html)
    missing = [d for d in wanted.values() if d.delivery_id not in found]
    if missing:
        keep_html(store, missing, found)
    return found


def keep_html(store: Store, decisions: Sequence[Decision], into: dict[str, str] | None = None) -> None:
    """Render the comments of `decisions` and keep them (the worker calls this as it stores a decision)."""
    rendered = [(d.delivery_id, d.repo, _digest(d.comment), render_markdown(d.comment))
                for d in decisions if d.comment is not None]
    with store.transaction() as run:
        for delivery_id, repo, digest, html in rendered:
            run("INSERT INTO comment_html (delivery_id, repo, digest, html) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (delivery_id) DO UPDATE SET digest = excluded.digest, html = excluded.html",
                (delivery_id, repo, digest, html))
    if into is not None:
        into.update({delivery_id: html for delivery_id, _, _, html in rendered})
