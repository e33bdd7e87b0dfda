"""`ddl-triage config check` and `ddl-triage labels list|create`: a repository's config before it is committed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.deciding.config_check import WantedLabel, check_config, wanted_labels
from bot.deciding.repo_config import CONFIG_PATH, RepoConfig
from bot.knowledge.taxonomy import Taxonomy, load_taxonomy

config_app = typer.Typer(no_args_is_help=True, help=f"A repository's config file ({CONFIG_PATH}).")
labels_app = typer.Typer(no_args_is_help=True, help="The labels a repository's config lets the bot add.")
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help=f"The repository's {CONFIG_PATH} (default: none, i.e. the defaults).")]


def register(app: typer.Typer) -> None:
    """Add `config` and `labels` to the main command line."""
    app.add_typer(config_app, name="config")
    app.add_typer(labels_app, name="labels")


@config_app.command("check")
def config_check(path: Annotated[Path, typer.Argument(help=f"The file to check, e.g. {CONFIG_PATH}.")]) -> None:
    """Validate a repository config as the service would; each error with its line and key, exit code 1."""
    taxonomy = load_taxonomy(Settings().taxonomy)
    config, problems = check_config(_read(path), taxonomy)
    for problem in problems:
        typer.echo(f"ddl-triage: error: {problem.format(str(path))}", err=True)
    if config is None:
        typer.echo(f"ddl-triage: {path}: {len(problems)} error(s); the service would do nothing in the repository "
                   "(no comment, no label, nothing stored) until it is fixed", err=True)
        raise typer.Exit(1)
    changed = config.model_dump(mode="json", exclude_defaults=True)
    typer.echo(f"{path}: ok" + ("" if changed else " (every key at its default)"))
    for key, value in changed.items():
        typer.echo(f"  {key}: {value}")
    if config.labels.enabled:
        typer.echo(f"  the bot adds only labels that exist: {len(wanted_labels(config, taxonomy))} names "
                   f"(`ddl-triage labels list --config {path}`; `labels create --repo OWNER/NAME` makes them)")


@labels_app.command("list")
def labels_list(config: ConfigOpt = None) -> None:
    """Every label the config lets the bot add (name, axis=taxonomy id, colour, description), one per line."""
    for label in _wanted(config):
        typer.echo(f"{label.name}\t{label.axis}={label.value}\t#{label.colour}\t{label.description}")


@labels_app.command("create")
def labels_create(
    repo: Annotated[str, typer.Option("--repo", help="OWNER/NAME of the repository.")],
    config: ConfigOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be created; create nothing.")] = False,
) -> None:
    """Create, through the GitHub API, the labels the config needs that the repository lacks; never edits or
    deletes one. Authenticates with DDL_TRIAGE_GITHUB_TOKEN, else as the App (DDL_TRIAGE_GITHUB_APP_ID and
    DDL_TRIAGE_GITHUB_PRIVATE_KEY); DDL_TRIAGE_GITHUB_API_URL names GitHub Enterprise Server."""
    from bot.cli.memory import reader_for

    wanted = _wanted(config)
    client = reader_for(Settings(), repo)
    present = {name.casefold() for name in client.label_names(repo)}
    missing = [label for label in wanted if label.name.casefold() not in present]
    for label in missing:
        if not dry_run:
            client.create_label(repo, label.name, label.colour, label.description)
        typer.echo(f"{'would create' if dry_run else 'created'} {label.name}\t{label.axis}={label.value}")
    typer.echo(f"{repo}: {len(missing)} label(s) {'to create' if dry_run else 'created'}, "
               f"{len(wanted) - len(missing)} already there", err=True)


def _wanted(path: Path | None) -> list[WantedLabel]:
    taxonomy = load_taxonomy(Settings().taxonomy)
    return wanted_labels(_config(path, taxonomy), taxonomy)


def _config(path: Path | None, taxonomy: Taxonomy) -> RepoConfig:
    if path is None:
        return RepoConfig()
    config, problems = check_config(_read(path), taxonomy)
    if config is None:
        raise ConfigError(f"{problems[0].format(str(path))} (`ddl-triage config check {path}` lists every error)")
    if not config.labels.enabled:
        typer.echo(f"ddl-triage: note: {path} has labels.enabled: false; these are the labels it would add",
                   err=True)
    return config


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
