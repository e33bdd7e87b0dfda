"""Reading a repository's `.github/ddl-triage.yml` as the App's installation, and what a job does for a
repository whose config turns the bot off (stores nothing of it)."""

from __future__ import annotations

import logging

from bot.repo_config import CONFIG_PATH, RepoConfig, parse_repo_config
from bot.service.errors import PermanentGitHubError
from bot.service.github.client import InstallationClient
from bot.service.handlers.context import JobContext
from bot.service.retention.erasure import forget_payload
from bot.taxonomy import Taxonomy

log = logging.getLogger(__name__)


def load_repo_config(client: InstallationClient | None, repo: str, taxonomy: Taxonomy) -> RepoConfig:
    """The repository's `.github/ddl-triage.yml` read as the App's installation (the defaults without
    credentials, without a file, or where the App may not read it)."""
    where = f"{repo}/{CONFIG_PATH}"
    try:
        text = client.read_file(repo, CONFIG_PATH) if client else None
    except PermanentGitHubError as exc:  # e.g. 403: the App's single-file permission names another path
        if exc.status == 401:  # the token, not the file: the job retries with a fresh one
            raise
        log.warning("%s cannot be read, using the defaults: %s", where, exc)
        text = None
    return parse_repo_config(text, taxonomy, where)


def repo_enabled(ctx: JobContext, repo: str) -> bool:
    return load_repo_config(ctx.client, repo, ctx.engine.taxonomy).enabled


def disabled(ctx: JobContext) -> str:
    """A job of a repository that turned the bot off: its stored delivery keeps no text of the issue."""
    forget_payload(ctx.state.store, ctx.delivery_id)
    return "disabled by the repository's config"
