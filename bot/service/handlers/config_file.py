"""Reading a repository's `.github/ddl-triage.yml` as the App's installation, failing closed: a file the App may
not read, or that does not validate, means nothing is done in that repository (no comment, no label, no stored
text) until it is fixed, and the error is logged and shown at `/healthz/details`; a missing file means the
defaults; `enabled: false` turns the bot off whatever else the file says."""

from __future__ import annotations

import logging

from bot.deciding.repo_config import CONFIG_PATH, RepoConfig, RepoConfigError, parse_repo_config
from bot.knowledge.taxonomy import Taxonomy
from bot.service.errors import PermanentGitHubError
from bot.service.github.client import InstallationClient
from bot.service.handlers.context import JobContext
from bot.service.repo_errors import clear_config_errors, record_config_error
from bot.service.retention.erasure import forget_payload

log = logging.getLogger(__name__)

BLOCKED = "blocked: the repository's config is unusable"
DISABLED = "disabled by the repository's config"


def load_repo_config(client: InstallationClient | None, repo: str, taxonomy: Taxonomy) -> RepoConfig:
    """The repository's config read as the App's installation (the defaults without credentials or without a
    file). A RepoConfigError when it cannot be read (403: the App's single-file permission names another path)
    or does not validate; a 5xx is a TransientGitHubError (the job retries); a 401 is the token's (the job
    retries with a fresh one)."""
    where = f"{repo}/{CONFIG_PATH}"
    try:
        text = client.read_file(repo, CONFIG_PATH) if client else None
    except PermanentGitHubError as exc:
        if exc.status == 401:
            raise
        raise RepoConfigError(where, f"cannot be read ({exc}); give the App read access to {CONFIG_PATH} "
                                     "(app.yml: single_file_paths)") from None
    return parse_repo_config(text, taxonomy, where)


def checked_config(ctx: JobContext, repo: str) -> RepoConfig:
    """`load_repo_config`, its outcome recorded for the ops pages: a RepoConfigError is logged and kept (shown
    at /healthz/details) before it is raised; a config that reads well clears what was kept."""
    try:
        config = load_repo_config(ctx.client, repo, ctx.engine.taxonomy)
    except RepoConfigError as exc:
        log.warning("%s; nothing is done in %s until it is fixed", exc, repo, extra={"repo": repo})
        record_config_error(ctx.state.store, repo, exc.problem)
        raise
    clear_config_errors(ctx.state.store, [repo])
    return config


def usable_config(ctx: JobContext, repo: str) -> RepoConfig | str:
    """The repository's config when the job may act there; else the job's outcome (its stored delivery then
    keeps no text of the issue): the bot is turned off there, or its config is unusable."""
    try:
        config = checked_config(ctx, repo)
    except RepoConfigError:
        forget_payload(ctx.state.store, ctx.delivery_id)
        return BLOCKED
    if not config.enabled:
        forget_payload(ctx.state.store, ctx.delivery_id)
        return DISABLED
    return config
