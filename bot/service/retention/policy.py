"""What the service database keeps and for how long (`RETENTION`, the table the docs show), and the hourly
prune that ages rows out, each kind in transactions of at most `BATCH` rows so intake never waits behind it."""

from __future__ import annotations

import time

from pydantic import BaseModel

from bot.core.storage.erasures import record_erasure
from bot.core.storage.fairness import give_way
from bot.service.queue.store import Store
from bot.service.retention.batches import BATCH, batched, deleting

DAY_S = 86400.0


class Kept(BaseModel):
    """One kind of stored item: where it lives, how long it stays, what removes it before that."""

    item: str
    table: str
    kept: str
    removed_by: str


UNINSTALL = "uninstall (installation deleted, or the repository removed from it)"
RETENTION: tuple[Kept, ...] = (
    Kept(item="webhook delivery (full payload: issue title, body, author)", table="deliveries",
         kept="as long as its job: `retention_days` after it ends (done, superseded or failed)",
         removed_by=f"{UNINSTALL}; a repository whose config turns the bot off (payload scrubbed at once)"),
    Kept(item="job (event, issue key, attempts, last error; a job deferred by write pacing: its prepared "
              "comment)", table="jobs",
         kept="`retention_days` (30) after it ends; queued and running jobs until they end",
         removed_by=UNINSTALL),
    Kept(item="decision (predictions, neighbours, the comment's text)", table="decisions",
         kept="`retention_days` (30)", removed_by=f"{UNINSTALL}; issues.deleted"),
    Kept(item="maintainer's correction (`/triage axis=value`, with the issue's title, body and author)",
         table="feedback", kept="`feedback_retention_days` (365) after the issue's latest correction",
         removed_by=f"{UNINSTALL}; issues.deleted; every worker's case base drops it at its next job"),
    Kept(item="repository memory: title, labels, state, vector, error signatures, the hashes of each text an "
              "issue had (never the body); the embedding cache's vectors of those texts",
         table="memory_issues, memory_signatures, memory_text_hashes",
         kept="while the App is installed on the repository",
         removed_by=f"{UNINSTALL}; issues.deleted (that issue); issues.transferred (moved); a config that "
                    "turns the bot off before the history sync"),
    Kept(item="history sync cursor, memory version", table="memory_sync, memory_versions",
         kept="while installed", removed_by=UNINSTALL),
    Kept(item="neighbour titles of public pack cases", table="memory_titles",
         kept="`memory_title_ttl_s` (1 day) before it is read again; the row until an uninstall",
         removed_by=f"{UNINSTALL} (the repository's own keys)"),
    Kept(item="erasure log (a digest of the repository's name, an issue number, a time)", table="erasures",
         kept="`retention_days` (30)", removed_by="retention only (it names nothing)"),
    Kept(item="write pacing, rate-limit pause (per installation id)", table="write_pacing, github_pauses",
         kept="while installed", removed_by="installation deleted"),
    Kept(item="redelivery requests (delivery GUIDs)", table="redeliveries", kept="`retention_days` (30)",
         removed_by="retention only"),
    Kept(item="review page: ratings, reaction reads, a decision's rendered comment, the repository's backtest",
         table="review_ratings, reaction_reads, comment_html, backtests",
         kept="`retention_days` (30); a rendered comment as long as its decision; a backtest while installed",
         removed_by=UNINSTALL),
    Kept(item="review page sign-in session (login, the user's token, repositories)", table="review_sessions",
         kept="until it expires (`review_session_hours`)", removed_by="retention only"),
    Kept(item="repository config error (the repository, the error, when)", table="repo_config_errors",
         kept="until the file reads well again", removed_by=UNINSTALL),
    Kept(item="worker heartbeats (host:pid)", table="workers", kept="1 day after the last beat",
         removed_by="retention only"),
)


def prune(store: Store, days: float, now: float | None = None, feedback_days: float = 365.0) -> dict[str, int]:
    """Forget what has outlived `days` (`feedback_days` for corrections); counts of what went.

    Done, superseded and failed jobs go with their deliveries (a failed job's payload holds the issue's text;
    an operator had `days` to retry it); queued and running jobs are kept: they still have work ahead.
    """
    now = time.time() if now is None else now
    cutoff = now - days * DAY_S
    gone = {"jobs": batched(store, "SELECT id FROM jobs WHERE status IN ('done', 'superseded', 'failed') "
                                    "AND updated_at < ? LIMIT ?", (cutoff,), deleting("jobs", "id"))}
    # Then their deliveries (received before the job ended, so before the cutoff too).
    gone["deliveries"] = batched(store, "SELECT id FROM deliveries WHERE received_at < ? AND NOT EXISTS "
                                         "(SELECT 1 FROM jobs WHERE jobs.delivery_id = deliveries.id) LIMIT ?",
                                  (cutoff,), deleting("deliveries", "id"))
    gone["decisions"] = batched(store, "SELECT delivery_id FROM decisions WHERE created_at < ? LIMIT ?",
                                 (cutoff,), deleting("decisions", "delivery_id"))
    gone["feedback"] = _prune_feedback(store, now - feedback_days * DAY_S)
    gone["erasures"] = batched(store, "SELECT id FROM erasures WHERE erased_at < ? LIMIT ?", (cutoff,),
                                deleting("erasures", "id"))
    gone["redeliveries"] = batched(store, "SELECT guid FROM redeliveries WHERE asked_at < ? LIMIT ?", (cutoff,),
                                    deleting("redeliveries", "guid"))
    gone["review"] = _prune_review(store, cutoff, now)
    return gone


def _prune_review(store: Store, cutoff: float, now: float) -> int:
    """The review page's rows: ratings and reaction reads go with their decisions' age, a rendered comment with
    its decision, a sign-in session when it expires."""
    removed = batched(store, "SELECT id FROM review_ratings WHERE created_at < ? LIMIT ?", (cutoff,),
                      deleting("review_ratings", "id"))
    removed += batched(store, "SELECT comment_id FROM reaction_reads WHERE read_at < ? LIMIT ?", (cutoff,),
                       deleting("reaction_reads", "comment_id"))
    removed += batched(store, "SELECT delivery_id FROM comment_html WHERE NOT EXISTS (SELECT 1 FROM decisions "
                              "WHERE decisions.delivery_id = comment_html.delivery_id) LIMIT ?", (),
                       deleting("comment_html", "delivery_id"))
    return removed + batched(store, "SELECT id_hash FROM review_sessions WHERE expires_at < ? LIMIT ?", (now,),
                             deleting("review_sessions", "id_hash"))


def _prune_feedback(store: Store, cutoff: float) -> int:
    """Corrections of issues whose latest correction is older than `cutoff`; logged as erased first, so every
    worker's case base forgets them too."""
    removed = 0
    while True:
        give_way(store.url)
        with store.transaction() as run:
            issues = run("SELECT repo, number FROM feedback GROUP BY repo, number HAVING MAX(created_at) < ? "
                         "LIMIT ?", (cutoff, BATCH // 10)).fetchall()
            for repo, number in issues:
                record_erasure(run, str(repo), int(number))
                removed += int(run("DELETE FROM feedback WHERE repo = ? AND number = ?", (repo, number)).rowcount)
        if len(issues) < BATCH // 10:
            return removed
