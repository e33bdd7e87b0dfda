"""`ddl-triage history sync` and `ddl-triage backtest`: the repository memory from the command line."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.core.domain import Issue, TriageResult
from bot.core.errors import ConfigError
from bot.core.redaction import redact
from bot.core.settings import Settings
from bot.memory.index import MemoryIndex
from bot.memory.labels import LabelModels
from bot.memory.queries import Memory, related_issues
from bot.memory.store import MemoryStore
from bot.memory.sync import sync_repository
from bot.models.embedding import Embedder, EmbeddingCache
from bot.reading.normalise import NormalisedIssue

if TYPE_CHECKING:
    from bot.service.github.client import InstallationClient

history_app = typer.Typer(no_args_is_help=True, help="The repository memory: a repository's issue history.")

ISSUE_URL = re.compile(r"/(?:issues|pull)/(?P<number>\d+)/?$")
RepoOpt = Annotated[str, typer.Option("--repo", help="OWNER/NAME of the repository.")]


def register(app: typer.Typer) -> None:
    app.add_typer(history_app, name="history")
    app.command("backtest")(backtest)


@history_app.command("sync")
def history_sync(
    repo: RepoOpt,
    since: Annotated[str | None, typer.Option("--since", help="Only issues updated on or after this date "
                                              "(YYYY-MM-DD or ISO 8601).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Stop after this many issues "
                                              "(the next run resumes).")] = None,
) -> None:
    """Page through REPO's issues (all states, oldest first) into the memory; resumes where it stopped.

    Authenticates with DDL_TRIAGE_GITHUB_TOKEN, else as the App (DDL_TRIAGE_GITHUB_APP_ID and
    DDL_TRIAGE_GITHUB_PRIVATE_KEY); DDL_TRIAGE_GITHUB_API_URL names GitHub Enterprise Server.
    """
    logging.getLogger("bot.memory").setLevel(logging.INFO)
    settings = Settings()
    since_at = parse_since(since)
    client = reader_for(settings, repo)
    store = MemoryStore(settings.sqlite_url)
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    try:
        cursor = sync_repository(client, store, embedder, repo, since=since_at, limit=limit,
                                 page_interval_s=settings.memory_page_interval_s,
                                 restart=since_at is not None, wait_for_reset=True)
    finally:
        store.close()
    more = "" if cursor.status == "done" else f"; not finished: run again to resume at page {cursor.page}"
    typer.echo(f"{repo}: {cursor.synced} issues in the memory ({redact(settings.sqlite_url)}){more}")


def with_history(settings: Settings, embedder: Embedder, issues: Sequence[Issue], results: Sequence[TriageResult],
                 read: Sequence[NormalisedIssue]) -> list[TriageResult]:
    """The results with the related issues of each issue's repository (`repo`), from whatever history of it was
    synced into the database (`ddl-triage history sync`); unchanged when none was. Never creates the database.
    `read`: each issue as the triage read it (`Engine.read_and_triage_many`), not read again."""
    results = list(results)
    repos = {issue.repo for issue in issues if issue.repo}
    if not repos or not database_exists(settings.sqlite_url):
        return results
    store = MemoryStore(settings.sqlite_url)
    try:
        synced = {repo for repo in repos if store.count(repo)}
        memory = Memory(store, MemoryIndex(store, settings.memory_max_rows), LabelModels(store.vectors, store.count))
        for j, (issue, normalised) in enumerate(zip(issues, read, strict=True)):
            if issue.repo in synced:
                vector = embedder.embed([normalised.text])[0]  # a cache hit: the engine embedded this text
                related = related_issues(memory, settings, issue.repo, issue_number(issue), vector,
                                         normalised.signatures)
                results[j] = results[j].model_copy(update={"related": related})
    finally:
        store.close()
    return results


def database_exists(url: str) -> bool:
    """False for an SQLite file not there yet (nothing was synced); PostgreSQL is asked."""
    return not url.startswith("sqlite:///") or Path(url.removeprefix("sqlite:///")).is_file()


def issue_number(issue: Issue) -> int | None:
    """The issue's number, given or read from its GitHub URL (so a synced issue is not related to itself)."""
    match = ISSUE_URL.search(issue.url or "")
    return issue.number if issue.number is not None else int(match["number"]) if match else None


def parse_since(since: str | None) -> datetime | None:
    if since is None:
        return None
    try:
        return datetime.fromisoformat(since)
    except ValueError:
        raise ConfigError(f"--since {since!r} is not a date; use YYYY-MM-DD or ISO 8601") from None


def reader_for(settings: Settings, repo: str) -> InstallationClient:
    """A client for `repo`: the personal or installation token, else the App's installation on the repository."""
    from github import Auth, Github, GithubIntegration

    from bot.service.github.api_errors import github_errors
    from bot.service.github.client import InstallationClient, client_options
    from bot.service.github.credentials import AppCredentials, resolve_private_key
    from bot.service.github.github_app import GitHubApp

    if "/" not in repo:
        raise ConfigError(f"--repo {repo!r} must be OWNER/NAME")
    if settings.github_token is not None:
        gh = Github(auth=Auth.Token(settings.github_token.get_secret_value()),
                    **client_options(settings.github_api_url))
        return InstallationClient(gh, lambda: None, 0)
    if settings.github_app_id is None or settings.github_private_key is None:
        raise ConfigError("set DDL_TRIAGE_GITHUB_TOKEN, or DDL_TRIAGE_GITHUB_APP_ID and "
                          "DDL_TRIAGE_GITHUB_PRIVATE_KEY, to read the repository's history")
    credentials = AppCredentials(app_id=settings.github_app_id, api_url=settings.github_api_url,
                                 private_key=resolve_private_key(settings.github_private_key.get_secret_value()))
    owner, name = repo.split("/", 1)
    integration = GithubIntegration(auth=Auth.AppAuth(credentials.app_id, credentials.private_key),
                                    **client_options(settings.github_api_url))
    with github_errors(f"the App's installation on {repo}"):
        installation = integration.get_repo_installation(owner, name).id
    return GitHubApp(credentials).installation(installation)


def backtest(
    repo: RepoOpt,
    last: Annotated[int, typer.Option("--last", min=1, help="How many of the latest issues to replay.")] = 200,
    out: Annotated[Path, typer.Option("--out", help="Directory for backtest.json, report.md and plots.")] = Path(
        "backtest"),
) -> None:
    """Replay REPO's last N issues from the synced memory (no API calls) and write what the App would have said."""
    from bot.memory.backtest import run_backtest
    from bot.memory.report import write_report

    settings = Settings()
    store = MemoryStore(settings.sqlite_url)
    try:
        if store.count(repo) == 0:
            raise ConfigError(f"{repo} has no synced issues in {redact(settings.sqlite_url)}; run "
                              f"`ddl-triage history sync --repo {repo}` first")
        result = run_backtest(store, repo, last, settings.memory_related_floor)
    finally:
        store.close()
    paths = write_report(result, out)
    _keep_for_review(settings, repo, result.summary())
    typer.echo(f"{repo}: {result.replayed} issues replayed -> {', '.join(str(p) for p in paths)}")


def _keep_for_review(settings: Settings, repo: str, summary: dict[str, object]) -> None:
    """The backtest's table, kept in the service database for the review page's summary (`/review`)."""
    from bot.service.queue.store import Store
    from bot.service.review.records import save_backtest

    store = Store(settings.sqlite_url)
    try:
        save_backtest(store, repo, summary)
    finally:
        store.close()
