"""`ddl-triage worker` and `ddl-triage jobs list|retry`: the service's queue from the command line."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer

from bot.settings import Settings

jobs_app = typer.Typer(no_args_is_help=True, help="The service's job queue (DDL_TRIAGE_DATABASE_URL).")
STATUSES = ("queued", "running", "done", "failed")


def register(app: typer.Typer) -> None:
    """Add `worker` and `jobs` to the main command line."""
    app.command("worker")(worker)
    app.add_typer(jobs_app, name="jobs")


def worker(shadow: Annotated[bool, typer.Option("--shadow", help="Store decisions instead of posting them.")]
           = False,
           report_fd: Annotated[int | None, typer.Option(hidden=True, help="serve's pipe for ready / error")] = None,
           parent: Annotated[int, typer.Option(hidden=True, help="serve's pid")] = 0,
           nice: Annotated[int, typer.Option(hidden=True, help="the niceness serve asks for")] = 0) -> None:
    """Run one worker process: triage queued deliveries from the service database until stopped."""
    from bot.service.processes import Supervised, run_worker_process

    settings = Settings()
    supervised = Supervised(report_fd, parent, nice) if report_fd is not None else None
    run_worker_process(settings.model_copy(update={"shadow": True}) if shadow else settings, supervised)


@jobs_app.command("list")
def jobs_list(status: Annotated[str | None, typer.Option(help=f"Only jobs of one status: {', '.join(STATUSES)}.")]
              = None,
              limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 50) -> None:
    """The latest jobs: id, status, attempts, event, issue, received, last error."""
    from bot.service.queue.upkeep import list_jobs
    from bot.service.state import open_store

    if status is not None and status not in STATUSES:
        raise typer.BadParameter(f"{status!r} is no status; use one of {', '.join(STATUSES)}", param_hint="--status")
    store = open_store(Settings(), busy_timeout_s=10.0)
    try:
        for job in list_jobs(store, status, limit):
            received = dt.datetime.fromtimestamp(job.received_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            error = (job.last_error or "").replace("\n", " ")[:120]
            typer.echo(f"{job.id}\t{job.status}\t{job.attempts}\t{job.event}.{job.action}\t{job.issue_key}\t"
                       f"{received}\t{error}")
    finally:
        store.close()


@jobs_app.command("retry")
def jobs_retry(ids: Annotated[list[int] | None, typer.Argument(help="Job ids (see `jobs list`).")] = None,
               all_failed: Annotated[bool, typer.Option("--all-failed", help="Every failed job.")] = False) -> None:
    """Queue failed jobs again with fresh attempts (a running worker picks them up)."""
    from bot.service.queue.upkeep import retry_jobs
    from bot.service.state import open_store

    if not ids and not all_failed:
        raise typer.BadParameter("name job ids or pass --all-failed", param_hint="IDS")
    store = open_store(Settings(), busy_timeout_s=10.0)
    try:
        count = retry_jobs(store, None if all_failed else list(ids or []))
    finally:
        store.close()
    typer.echo(f"{count} failed job(s) queued again")
