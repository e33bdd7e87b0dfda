"""Webhook handlers that keep the memory current: installation (sync or forget) and the issue lifecycle."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from bot.domain import Issue, TriageResult
from bot.memory.overrides import blend, corrected_examples, labelled_examples
from bot.memory.records import embed_records, memory_issue
from bot.memory.service import Memory, related_issues, repo_label_suggestions, with_titles
from bot.memory.sync import sync_repository
from bot.normalise import normalise
from bot.service.errors import NotFound, PermanentGitHubError
from bot.service.events import WebhookEvent
from bot.service.github import InstallationClient
from bot.service.repo_config import RepoConfig
from bot.service.router import JobContext, Router

log = logging.getLogger(__name__)

router = Router()


def memory_of(ctx: JobContext) -> Memory:
    if ctx.state.memory is None:
        raise RuntimeError("the repository memory is not open")
    return ctx.state.memory


def payload_of(ctx: JobContext) -> dict[str, Any]:
    """The delivery's full payload (the domain event keeps only what triage needs)."""
    data: dict[str, Any] = json.loads(ctx.state.store.delivery_payload(ctx.delivery_id))
    return data


# --- installation: sync on install, forget on uninstall ---------------------------------------------------


@router.register("installation", "created")
@router.register("installation_repositories", "added")
def handle_installed(ctx: JobContext, event: WebhookEvent) -> str:
    """Sync each repository a slice of pages at a time; unfinished ones are queued again as a new job."""
    if ctx.client is None:
        return "no credentials to sync with"
    payload = payload_of(ctx)
    key = "repositories" if event.event == "installation" else "repositories_added"
    repos = [str(r["full_name"]) for r in payload.get(key) or [] if isinstance(r, dict) and "full_name" in r]
    if not repos:  # "all repositories" installations may list none in the payload
        repos = ctx.client.installation_repositories()
    memory, settings = memory_of(ctx), ctx.state.settings
    unfinished = []
    for repo in repos:
        cursor = memory.store.cursor(repo)
        if cursor is not None and cursor.status == "done":
            continue
        cursor = sync_repository(ctx.client, memory.store, ctx.engine.embedder, repo,
                                 installation_id=event.installation_id,
                                 max_pages=settings.memory_sync_pages_per_job,
                                 page_interval_s=settings.memory_page_interval_s)
        if cursor.status != "done":
            unfinished.append(f"{repo}@{cursor.page}")
    if unfinished:  # the rest is a new job, so triage jobs are not held up behind a long history
        # One id per slice (a retried job re-queues nothing twice); rooted at the original delivery id.
        more = f"{ctx.delivery_id.split('/sync/')[0]}/sync/{'+'.join(unfinished)}"
        ctx.state.store.record_delivery(more, event.event, event.action, json.dumps(payload), event.issue_key)
        ctx.state.wake_worker.set()
        return f"history sync continues for {len(unfinished)} repositories"
    return f"history of {len(repos)} repositories synced"


@router.register("installation", "deleted")
@router.register("installation_repositories", "removed")
def handle_uninstalled(ctx: JobContext, event: WebhookEvent) -> str:
    """An uninstalled repository's memory is deleted: issues, vectors and sync cursor."""
    payload = payload_of(ctx)
    key = "repositories" if event.event == "installation" else "repositories_removed"
    repos = [str(r["full_name"]) for r in payload.get(key) or [] if isinstance(r, dict) and "full_name" in r]
    memory = memory_of(ctx)
    removed = sum(memory.forget_repo(repo) for repo in repos)
    log.info("memory of %d repositories deleted (%d issues)", len(repos), removed, extra={"repos": repos})
    return f"memory of {len(repos)} repositories deleted"


# --- the issue lifecycle (opened, edited and reopened are recorded by the triage job) --------------------


def remember_issue(ctx: JobContext, repo: str, data: dict[str, Any]) -> None:
    """Upsert one issue JSON into the memory (with what closed it, when it is closed and a client can tell)."""
    closed_by = duplicate_of = None
    if data.get("state") == "closed" and ctx.client is not None:
        try:
            closed_by, duplicate_of = ctx.client.closing_reference(repo, int(data["number"]))
        except (NotFound, PermanentGitHubError) as exc:
            log.warning("timeline of %s#%s not read: %s", repo, data["number"], exc)
    memory = memory_of(ctx)
    memory.store.upsert([(memory_issue(repo, data, closed_by, duplicate_of),
                          embed_records(ctx.engine.embedder, [data])[0])])


@router.register("issues", "closed", "labeled", "unlabeled")
def handle_issue_change(ctx: JobContext, event: WebhookEvent) -> str:
    remember_issue(ctx, event.repo, payload_of(ctx)["issue"])
    return f"memory updated ({event.action})"


@router.register("issues", "deleted")
def handle_issue_deleted(ctx: JobContext, event: WebhookEvent) -> str:
    memory_of(ctx).store.delete_issue(event.repo, event.number)
    return "memory updated (deleted)"


@router.register("issues", "transferred")
def handle_issue_transferred(ctx: JobContext, event: WebhookEvent) -> str:
    """Gone from this repository; remembered in the new one only if that one has a memory (is installed)."""
    memory = memory_of(ctx)
    memory.store.delete_issue(event.repo, event.number)
    changes = payload_of(ctx).get("changes") or {}
    new_repo = str((changes.get("new_repository") or {}).get("full_name") or "")
    new_issue = changes.get("new_issue")
    if new_repo and isinstance(new_issue, dict) and memory.store.cursor(new_repo) is not None:
        remember_issue(ctx, new_repo, new_issue)
    return "memory updated (transferred)"


# --- what the triage job asks of the memory -------------------------------------------------------------


def remember_from_delivery(ctx: JobContext, event: WebhookEvent) -> None:
    """An opened, edited or reopened issue joins (or updates) its repository's memory at once."""
    if ctx.state.memory is not None and event.event == "issues":
        remember_issue(ctx, event.repo, payload_of(ctx)["issue"])


@dataclass(frozen=True)
class Recalled:
    result: TriageResult
    repo_labels: list[tuple[str, float]]  # the repository's own labels its label model suggests


def recall(ctx: JobContext, repo: str, number: int, issue: Issue, result: TriageResult,
           config: RepoConfig) -> Recalled:
    """The result with this repository's labelled memory blended in, its related issues, and the pack
    neighbours' titles and states; and the repository's own labels suggested for the issue."""
    memory = ctx.state.memory
    if memory is None:
        return Recalled(result, [])
    settings = ctx.state.settings
    vector = ctx.engine.embedder.embed([normalise(issue).text])[0]  # a cache hit: the engine embedded it
    examples = [*corrected_examples(ctx.engine.embedder, vector, ctx.state.store.feedback_cases(), repo, number),
                *labelled_examples(memory.index, vector, repo, number, config)]
    result = blend(ctx.engine, result, examples)
    related = related_issues(memory, settings, repo, number, vector)
    lookup = ClientLookup(ctx.client) if ctx.client is not None else None
    result = with_titles(result, memory.store, lookup, settings.memory_title_ttl_s)
    return Recalled(result.model_copy(update={"related": related}),
                    repo_label_suggestions(memory, repo, vector))


class ClientLookup:
    """Title, type and state of an issue through the installation's client; a missing one is all None."""

    def __init__(self, client: InstallationClient) -> None:
        self.client = client

    def lookup(self, repo: str, number: int) -> tuple[str | None, str | None, str | None]:
        try:
            snapshot = self.client.read_issue(repo, number)
        except (NotFound, PermanentGitHubError):
            return None, None, None
        return snapshot.issue.title, "pull_request" if snapshot.is_pull_request else "issue", snapshot.state
