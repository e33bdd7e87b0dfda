"""The `ddl-triage` command line: triage one issue, predict a batch, build the index, run the service."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from bot.core.domain import Issue
from bot.core.errors import DataError, TriageError
from bot.core.redaction import install_redaction, redact
from bot.core.settings import Settings

if TYPE_CHECKING:
    from bot.models.engine import Engine

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Triage issues of distributed deep-learning frameworks (offline by default).")
index_app = typer.Typer(no_args_is_help=True, help="The embedding cache of the case base.")
app.add_typer(index_app, name="index")

DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Gold data directory (DDL_TRIAGE_DATA_DIR).")]
PredictorOpt = Annotated[str | None, typer.Option("--predictor", help="Predictor name (DDL_TRIAGE_PREDICTOR).")]
CasesOpt = Annotated[list[Path] | None, typer.Option("--cases", help="Case-base JSONL file(s); default: every "
                                                     "gold file in the data directory.")]


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"ddl-triage: error: {message}", err=True)
    raise typer.Exit(code)


def load_settings(data_dir: Path | None = None, predictor: str | None = None) -> Settings:
    overrides = {k: v for k, v in {"data_dir": data_dir, "predictor": predictor}.items() if v is not None}
    try:
        settings = Settings().model_copy(update=overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        fail(f"invalid setting DDL_TRIAGE_{str(err['loc'][0]).upper()}: {err['msg']}")
    if settings.data_dir is not None:
        check_data_dir(settings.data_dir, "--data-dir" if data_dir is not None else "DDL_TRIAGE_DATA_DIR")
    return settings


def check_data_dir(path: Path, given_by: str) -> None:
    """Fail at once, naming the flag or variable, when a data directory cannot serve as a case base."""
    from bot.knowledge.dataset import GOLD_FILES

    if not path.exists():
        fail(f"{given_by} {path}: no such directory; give the folder of the gold files, or leave {given_by} "
             "out to use the shipped case pack")
    if not path.is_dir():
        fail(f"{given_by} {path}: not a directory; give the folder of the gold files")
    if not any((path / name).is_file() for name in GOLD_FILES):
        fail(f"{given_by} {path}: holds no gold files ({', '.join(GOLD_FILES)}); leave {given_by} out to use "
             "the shipped case pack")


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar on stderr, fed by the engine's (task, advance, total) callback."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   transient=True, disable=not enabled or not sys.stderr.isatty())
    tasks: dict[str, TaskID] = {}

    def update(task: str, advance: int, total: int) -> None:
        if task not in tasks:
            tasks[task] = bar.add_task(task, total=total)
        bar.update(tasks[task], advance=advance, total=total)

    with bar:
        yield update


def _engine(settings: Settings, cases: list[Path] | None = None, predictor: str | None = None) -> Engine:
    from bot.models.engine import build_engine

    with progress_bar() as update:
        return build_engine(settings, cases or None, predictor, progress=update)


@app.command()
def triage(
    file: Annotated[Path | None, typer.Argument(help="A JSON issue ({title, body}) or a text/markdown file.")] = None,
    title: Annotated[str | None, typer.Option("--title", help="Issue title.")] = None,
    body: Annotated[str | None, typer.Option("--body", help="Issue body (markdown).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the triage result as JSON.")] = False,
    data_dir: DataDirOpt = None,
    predictor: PredictorOpt = None,
    cases: CasesOpt = None,
    repo: Annotated[str | None, typer.Option("--repo", help="Related issues from OWNER/NAME's synced history.")] = None,
) -> None:
    """Print the comment the bot would post for one issue (or its JSON result)."""
    from bot.cli.memory import with_history
    from bot.comment import CommentPolicy
    from bot.comment.compose import compose
    from bot.comment.policy import SILENT_FIRST_STEP, silence_reason
    from bot.comment.reading import reading_model

    issue = _issue_from_args(file, title, body).model_copy(update={"repo": repo} if repo else {})
    settings = load_settings(data_dir, predictor)
    engine = _engine(settings, cases, predictor)
    result, read = engine.read_and_triage(issue)  # the issue is read once, here
    [result] = with_history(settings, engine.embedder, [issue], [result], [read])
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    policy = CommentPolicy.from_settings(settings)
    plan, comment = compose(issue, result, engine.taxonomy, policy, chat=reading_model(settings), normalised=read)
    if comment is not None:
        typer.echo(comment)
    elif silence_reason(plan.substance, policy) == SILENT_FIRST_STEP and plan.diagnosis is not None:
        typer.echo(f"ddl-triage: the bot would stay silent: it recognised {plan.diagnosis.title!r}, but the step it "
                   "knows is a generic one, the same whatever the post says (`--json` shows it and the labels)",
                   err=True)
    else:
        typer.echo("ddl-triage: the bot would stay silent: no next step, no precedent of the same mechanism and no "
                   "question answered before (`--json` shows the labels)", err=True)


def _issue_from_args(file: Path | None, title: str | None, body: str | None) -> Issue:
    if file is None:
        if title is None and body is None:
            fail("give an issue: a FILE, or --title and/or --body")
        return Issue(id="cli", title=title or "", body=body or "")
    try:
        raw = file.read_bytes()
    except OSError as exc:
        fail(f"{file}: cannot read: {exc.strerror}")
    text = raw.decode("utf-8", errors="replace")
    if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
        typer.echo(f"ddl-triage: warning: {file}: bytes that are not UTF-8 were replaced", err=True)
    if file.suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            fail(f"{file}:{exc.lineno}: not JSON ({exc.msg}); give a JSON object with title and body")
        if not isinstance(obj, dict):
            fail(f"{file}: expected a JSON object with title and body")
        return Issue(id=str(obj.get("id", file.stem)), title=str(obj.get("title") or title or ""),
                     body=str(obj.get("body") or body or ""), repo=obj.get("repo"))
    return Issue(id=file.stem, title=title or "", body=text)


@app.command()
def predict(
    input: Annotated[Path, typer.Option("--input", help="JSONL with id, title, body per line.")],
    output: Annotated[Path, typer.Option("--output", help="Where to write one prediction line per issue.")],
    data_dir: DataDirOpt = None,
    predictor: PredictorOpt = None,
    cases: CasesOpt = None,
    with_comment: Annotated[bool, typer.Option(
        "--with-comment", help="Add `comment` to each line: the markdown the bot would post, or null when it would "
                               "stay silent.")] = False,
) -> None:
    """Predict every issue of a JSONL file (the batch contract in the README)."""
    from bot.cli.memory import with_history
    from bot.comment import CommentPolicy, compose_comment
    from bot.comment.reading import reading_model
    from bot.knowledge.dataset import read_issues

    settings = load_settings(data_dir, predictor)
    skipped = 0

    def report(err: DataError) -> None:
        nonlocal skipped
        skipped += not err.kept
        typer.echo(f"ddl-triage: warning: {err}", err=True)

    issues = list(read_issues(input, report))
    engine = _engine(settings, cases, predictor)
    with progress_bar() as update:
        triaged = engine.read_and_triage_many(issues, progress=update)  # each issue is read once, here
    read = [normalised for _, normalised in triaged]
    results = with_history(settings, engine.embedder, issues, [result for result, _ in triaged], read)
    policy, chat = CommentPolicy.from_settings(settings), reading_model(settings) if with_comment else None
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as handle:
        for issue, result, normalised in zip(issues, results, read, strict=True):
            record = result.batch_record()
            if with_comment:
                record["comment"] = compose_comment(issue, result, engine.taxonomy, policy, chat=chat,
                                                    normalised=normalised)
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    typer.echo(f"predicted {len(results)} issues -> {output}" + (f" ({skipped} lines skipped)" if skipped else ""),
               err=True)


@index_app.command("build")
def index_build(data_dir: DataDirOpt = None, cases: CasesOpt = None) -> None:
    """Embed the case base into the on-disk cache (later runs embed only what changed)."""
    settings = load_settings(data_dir)
    engine = _engine(settings, cases)
    typer.echo(f"case base: {len(engine.index)} cases embedded with {engine.embedder.model_id} "
               f"({engine.embedder.embedded_count} new), cache {settings.cache_dir}", err=True)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    shadow: Annotated[bool, typer.Option("--shadow", help="Store decisions instead of posting them.")] = False,
    data_dir: DataDirOpt = None,
    workers: Annotated[int, typer.Option(min=0, help="Worker processes to start beside the web process "
                                                    "(0: web only, for a replica behind `ddl-triage worker`s).")] = 1,
) -> None:
    """Run the GitHub App webhook service (FastAPI + uvicorn) and its worker process(es)."""
    from bot.service.metrics_files import share_metrics_between_processes

    settings = load_settings(data_dir)
    if shadow:
        settings = settings.model_copy(update={"shadow": True})
    share_metrics_between_processes(settings)  # before prometheus_client is imported, here or in a worker
    check_knowledge(settings)
    from bot.service.processes import run_server

    run_server(settings, host, port, workers)


def check_knowledge(settings: Settings) -> None:
    """Fail in seconds, before the server starts, when the case pack or the data directory cannot serve."""
    from bot.knowledge.dataset import default_case_files
    from bot.knowledge.taxonomy import load_taxonomy
    from bot.models.pack import load_pack, pack_path

    taxonomy = load_taxonomy(settings.taxonomy)
    if settings.data_dir is None:
        load_pack(pack_path(settings), taxonomy)
    else:
        default_case_files(settings.data_dir)


@app.command()
def action(
    shadow: Annotated[bool, typer.Option("--shadow", help="Decide and store, post nothing.")] = False,
) -> None:
    """GitHub Action form: triage this workflow's issue event (GITHUB_EVENT_PATH) and upsert the one comment."""
    from bot.service.action import run_action

    settings = load_settings()
    if shadow:
        settings = settings.model_copy(update={"shadow": True})
    typer.echo(run_action(settings))


def _register_subcommands() -> None:
    from bot.cli.config import register as register_config  # config check, labels list|create
    from bot.cli.memory import register as register_memory  # history sync, backtest
    from bot.cli.pack import pack_app
    from bot.cli.service import register as register_service_commands

    app.add_typer(pack_app, name="pack")
    register_memory(app)
    register_config(app)
    register_service_commands(app)


_register_subcommands()


def main() -> None:
    """Entry point: domain errors become one line on stderr and a non-zero exit, never a traceback."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_redaction()
    try:
        app(standalone_mode=True)
    except TriageError as exc:
        _exit(str(exc), 1)
    except KeyboardInterrupt:
        _exit("interrupted", 130)
    except Exception as exc:  # the catch-all of the CLI boundary
        logging.getLogger(__name__).debug("internal error", exc_info=True)
        _exit(f"internal error ({type(exc).__name__}: {exc}); please report it with the command you ran", 70)


def _exit(message: str, code: int) -> NoReturn:
    print(f"ddl-triage: error: {redact(message)}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
