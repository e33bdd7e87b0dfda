"""Erasing what the service database holds of uninstalled repositories or a deleted issue: the memory's rows,
the decisions and the maintainers' corrections (issue title, body, author), and every stored delivery about
them with its job (payloads of failed jobs included).

Each erasure is logged first (`bot/core/storage/erasures.py`): a job that started before it (a triage running
during the uninstall) then stores nothing of it, and every worker's case base drops the corrections. The
rows then go in transactions of at most BATCH rows, found through indexed columns (a job's issue key, a
decision's or correction's repository), so intake never waits more than one batch behind an erasure."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from bot.core.storage.erasures import record_erasure
from bot.core.storage.fairness import give_way
from bot.memory.overrides import correction_text_hashes
from bot.memory.queries import Memory
from bot.models.embedding import Embedder
from bot.service.github.payloads import named_repositories, reparse_fields
from bot.service.queue.store import Store
from bot.service.repo_errors import clear_config_errors
from bot.service.retention.batches import BATCH, batched, delete_deliveries, deleting

# The payload fields that name the repositories a delivery is about.


def erase_repositories(store: Store, memory: Memory, embedder: Embedder, repos: Collection[str],
                       current_delivery: str, installation_id: int | None = None,
                       whole_installation: bool = False) -> dict[str, int]:
    """Delete every row of `repos`, in small transactions; counts of what went.

    A delivery about one of them goes with its job unless that job is running (another worker holds it: it
    stores nothing after the erasure, and retention takes it) or still queued for another repository too (a
    history sync that goes on elsewhere). `current_delivery`, the uninstall's own, is kept for its job's
    bookkeeping with a payload that names no repository. Their config errors and review-page rows go too.
    With `whole_installation`, the installation's write pacing and rate-limit pause go as well.
    """
    wanted = sorted(set(repos))
    with store.transaction() as run:
        for repo in wanted:
            record_erasure(run, repo)
    # The corrections' vectors first (a retry could not find them once their rows are gone): an issue edited after
    # its correction was embedded under the older text too.
    embedder.forget([digest for repo in wanted for digest in correction_text_hashes(store.feedback_cases(repo=repo))])
    issues = sum(memory.store.count(repo) for repo in wanted)
    texts = [digest for repo in wanted for digest in memory.forget_repo(repo)]
    clear_config_errors(store, wanted)  # an uninstalled repository's config error is no longer shown
    embedder.forget(texts)
    gone = {"issues": issues, "texts": len(texts), "decisions": 0, "feedback": 0, "deliveries": 0}
    for repo in wanted:
        gone["decisions"] += batched(store, "SELECT delivery_id FROM decisions WHERE repo = ? LIMIT ?", (repo,),
                                      deleting("decisions", "delivery_id"))
        gone["feedback"] += batched(store, "SELECT id FROM feedback WHERE repo = ? LIMIT ?", (repo,),
                                     deleting("feedback", "id"))
        # An issue's key is "owner/name#number": the repository's keys are the index range [name#, name$).
        gone["deliveries"] += batched(
            store, "SELECT delivery_id FROM jobs WHERE issue_key >= ? AND issue_key < ? AND status <> 'running' "
                   "AND delivery_id <> ? LIMIT ?", (f"{repo}#", f"{repo}$", current_delivery), delete_deliveries)
    if installation_id is not None:
        gone["deliveries"] += _erase_installation_deliveries(store, set(wanted), installation_id, current_delivery)
    with store.transaction() as run:
        # The review page's rows of those repositories (ratings, reaction reads, backtests, rendered comments).
        for table in ("review_ratings", "reaction_reads", "backtests", "comment_html"):
            for repo in wanted:
                run(f"DELETE FROM {table} WHERE repo = ?", (repo,))
        scrub_payload(run, current_delivery)
        if whole_installation and installation_id is not None:
            run("DELETE FROM write_pacing WHERE installation_id = ?", (installation_id,))
            run("DELETE FROM github_pauses WHERE installation_id = ?", (installation_id,))
    return gone


def erase_issue(store: Store, memory: Memory, embedder: Embedder, repo: str, number: int) -> dict[str, int]:
    """A deleted issue: its memory row, decisions and corrections (the case bases drop them at their next job),
    and the cached vectors of every text it had (an edit leaves the older text's vector behind)."""
    # The corrections' vectors first: once their rows are gone, a retry of this job could not find them.
    embedder.forget(correction_text_hashes([r for r in store.feedback_cases(repo=repo) if r["number"] == number]))
    with store.transaction() as run:
        record_erasure(run, repo, number)
        decisions = int(run("DELETE FROM decisions WHERE repo = ? AND number = ?", (repo, number)).rowcount)
        feedback = int(run("DELETE FROM feedback WHERE repo = ? AND number = ?", (repo, number)).rowcount)
    texts = memory.store.delete_issue(repo, number)
    embedder.forget(texts)
    return {"decisions": decisions, "feedback": feedback, "texts": len(texts)}


def forget_payload(store: Store, delivery_id: str) -> None:
    """The stored delivery keeps no repository and no text (a job of a repository that turned the bot off)."""
    with store.transaction() as run:
        scrub_payload(run, delivery_id)


def scrub_payload(run: Any, delivery_id: str) -> None:
    """Keep only what parsing the delivery again needs (action, installation, sender): no repository, no text."""
    row = run("SELECT payload FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
    if row is None:
        return
    kept = reparse_fields(json.loads(row[0]))
    run("UPDATE deliveries SET payload = ? WHERE id = ?", (json.dumps(kept), delivery_id))


def _erase_installation_deliveries(store: Store, repos: set[str], installation_id: int, current: str) -> int:
    """The installation's own deliveries (installed, repositories added or removed: one key per installation)
    that name one of `repos`; a queued one that names other repositories too is left to go on."""
    with store.transaction() as run:
        rows = run("SELECT j.delivery_id, d.payload, j.status FROM jobs j JOIN deliveries d ON d.id = j.delivery_id "
                   "WHERE j.issue_key = ?", (f"installation/{installation_id}#0",)).fetchall()
    doomed = [str(d) for d, payload, status in rows if d != current and _erasable(str(payload), status, repos)]
    for start in range(0, len(doomed), BATCH):
        give_way(store.url)
        with store.transaction() as run:
            delete_deliveries(run, doomed[start:start + BATCH])
    return len(doomed)


def _erasable(payload: str, status: str | None, repos: set[str]) -> bool:
    named = named_repositories(payload)
    if not named & repos or status == "running":
        return False
    return status != "queued" or named <= repos
