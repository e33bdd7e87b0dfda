"""+1 / -1 reactions on the bot's comments as Useful / Not useful. GitHub sends no webhook for reactions, so a
worker reads them: comments younger than `reactions_max_age_days`, each at most once an hour, at most
`reactions_per_hour` reads an hour across every process (the `reaction_reads` table books them), and only while
the installation's rate limit keeps its reserve for triage. A reaction counts only from someone whose role may
triage; a reaction taken back is a rating taken back."""

from __future__ import annotations

import logging
import time

from bot.service.decisions.models import Decision
from bot.service.decisions.queries import read_decisions
from bot.service.errors import NotFound
from bot.service.github.client import InstallationClient
from bot.service.github.models import TRIAGE_ROLES
from bot.service.github.payloads import installation_of
from bot.service.review.records import REACTION
from bot.service.state import ServiceState

log = logging.getLogger(__name__)

HOUR_S = 3600.0
VERDICT = {"+1": True, "-1": False}


def read_reactions(state: ServiceState, now: float | None = None) -> int:
    """One round: read the reactions of the comments due, within this hour's budget; how many were read."""
    if state.github is None:
        return 0
    now = time.time() if now is None else now
    due = _claim(state, now)
    clients: dict[int, InstallationClient] = {}
    for decided, installation_id in due:
        client = clients.get(installation_id) or clients.setdefault(
            installation_id, state.github.installation(installation_id))
        if client.pace_reads() > 0:  # the hour's requests are running low: triage first
            log.info("reactions: the rate limit's reserve is reached; the rest wait for the next round")
            break
        try:
            reactions = client.reactions(decided.repo, int(decided.comment_id or 0))
        except NotFound:
            reactions = []
        _store(state, client, decided, reactions, now)
    return len(due)


def _claim(state: ServiceState, now: float) -> list[tuple[Decision, int]]:
    """Book the reads of this round: the comments not read for an hour, least recently read first, as many
    as the hour's budget has left (the bookings of every process count)."""
    settings = state.settings
    oldest = now - settings.reactions_max_age_days * 86400
    with state.store.transaction() as run:
        spent = int(run("SELECT COUNT(*) FROM reaction_reads WHERE read_at > ?", (now - HOUR_S,)).fetchone()[0])
        left = settings.reactions_per_hour - spent
        if left <= 0:
            return []
        rows = run("SELECT d.delivery_id, d.decision, d.created_at, p.payload FROM decisions d JOIN deliveries p "
                   "ON p.id = d.delivery_id WHERE d.created_at >= ? ORDER BY d.created_at DESC", (oldest,)).fetchall()
        payloads = {str(row[0]): row[3] for row in rows}
        latest: dict[int, tuple[Decision, int]] = {}  # comment id -> its newest decision, and the installation
        for decided in read_decisions(row[:3] for row in rows):
            installation = installation_of(payloads.get(decided.delivery_id) or "{}")
            if decided.posted and decided.comment_id and installation and decided.comment_id not in latest:
                latest[decided.comment_id] = (decided, installation)
        last = {int(c): float(t) for c, t in run("SELECT comment_id, read_at FROM reaction_reads").fetchall()}
        chosen = sorted((item for cid, item in latest.items() if last.get(cid, 0.0) <= now - HOUR_S),
                        key=lambda item: last.get(int(item[0].comment_id or 0), 0.0))[:left]
        for decided, _ in chosen:
            run("INSERT INTO reaction_reads (comment_id, repo, read_at) VALUES (?, ?, ?) ON CONFLICT (comment_id) "
                "DO UPDATE SET read_at = excluded.read_at", (decided.comment_id, decided.repo, now))
    return chosen


def _store(state: ServiceState, client: InstallationClient, decided: Decision, reactions: list[tuple[str, str]],
           now: float) -> None:
    """The reactions' ratings replace the ones read last time (a reaction taken back is gone)."""
    votes: dict[str, bool] = {}
    for login, content in reactions:
        if content in VERDICT and login and not login.endswith("[bot]"):
            votes[login] = VERDICT[content]  # both +1 and -1 from one person: the later one
    allowed = {login: v for login, v in votes.items() if client.role_of(decided.repo, login) in TRIAGE_ROLES}
    with state.store.transaction() as run:
        run("DELETE FROM review_ratings WHERE delivery_id = ? AND source = ?", (decided.delivery_id, REACTION))
        for login, useful in allowed.items():
            run("INSERT INTO review_ratings (delivery_id, repo, number, author, useful, source, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (decided.delivery_id, decided.repo, decided.number, login, int(useful), REACTION, now))
