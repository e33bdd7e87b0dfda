"""`ddl-triage worker`, `jobs list|retry`, `replay` and `decisions`: the service from the command line."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Annotated

import typer

from bot.core.settings import Settings

jobs_app = typer.Typer(no_args_is_help=True, help="The service's job queue (DDL_TRIAGE_DATABASE_URL).")
STATUSES = ("queued", "running", "done", "failed")


def register(app: typer.Typer) -> None:
    """Add `worker`, `jobs`, `replay` and `decisions` to the main command line."""
    app.command("worker")(worker)
    app.command("replay")(replay)
    app.command("decisions")(decisions)
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


def replay(
    payload: Annotated[Path, typer.Argument(help="A saved webhook delivery body (JSON).")],
    url: Annotated[str, typer.Option(help="The running service's webhook URL.")] = "http://127.0.0.1:8000/webhook",
    event: Annotated[str, typer.Option(help="X-GitHub-Event of the delivery.")] = "issues",
    delivery: Annotated[str | None, typer.Option(help="X-GitHub-Delivery id (default: a new one).")] = None,
    wait_s: Annotated[float, typer.Option("--wait-s", min=0, help="Seconds to wait for the decision and print its "
                                          "comment as markdown (0: send only, print the answer).")] = 60.0,
) -> None:
    """Sign a saved delivery with DDL_TRIAGE_WEBHOOK_SECRET, send it to a running service, print the comment."""
    from bot.service.web.replay import render_decision, replay_delivery, wait_for_decision

    settings = Settings()
    delivery_id = delivery or str(uuid.uuid4())
    status, text = replay_delivery(settings, payload, url, event, delivery_id)
    if status >= 400:
        typer.echo(f"{status} {text}")
        raise typer.Exit(1)
    if wait_s == 0 or not _stores_a_decision(event, payload, text):  # no triage, so no decision to wait for
        typer.echo(f"{status} {text}")
        return
    typer.echo(f"{status} {text}; waiting for the decision of delivery {delivery_id}", err=True)
    decision = wait_for_decision(settings, url, delivery_id, wait_s)
    if decision is None:
        typer.echo(f"ddl-triage: error: no decision for delivery {delivery_id} within {wait_s:g} s; the job may "
                   "still be queued or have failed (`ddl-triage jobs list`)", err=True)
        raise typer.Exit(1)
    typer.echo(render_decision(decision, heading=False))


def decisions(
    url: Annotated[str, typer.Option(help="The running service (its base URL).")] = "http://127.0.0.1:8000",
    repo: Annotated[str | None, typer.Option("--repo", help="Only OWNER/NAME's decisions.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="How many, newest first.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="The raw JSON of GET /decisions.")] = False,
) -> None:
    """The latest decisions of a running service: outcome, labels shown, and each comment as markdown."""
    from bot.service.web.replay import fetch_decisions, render_decision

    found = fetch_decisions(Settings(), url, repo, limit)
    if as_json:
        typer.echo(json.dumps({"decisions": found}, indent=2, ensure_ascii=False))
        return
    typer.echo("\n\n".join(render_decision(d) for d in found) if found else "no decisions yet")


def _stores_a_decision(event: str, payload: Path, answer: str) -> bool:
    """Whether the accepted delivery triages an issue (opened, edited, reopened), so a decision will be stored."""
    try:
        status = json.loads(answer).get("status")
        action = json.loads(payload.read_bytes()).get("action")
    except (ValueError, AttributeError, OSError):
        return False
    return status in ("queued", "requeued") and event == "issues" and action in ("opened", "edited", "reopened")
