"""Jobs: retries on GitHub's 5xx, rate limits and network errors; crashes and restarts; failures kept."""

from __future__ import annotations

import time

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.handlers.dispatch import execute_job
from bot.service.queue.upkeep import list_jobs
from tests.fake_github import (
    COMMENTS,
    DROP,
    REPO,
    FakeGitHub,
    deliver,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
    wait_until,
)


def comment_posts(github: FakeGitHub) -> list[float]:
    return [r.at for r in github.requests if r.method == "POST" and r.path == COMMENTS]


def test_a_502_then_a_403_with_retry_after_end_in_one_comment(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    github.fail("POST", COMMENTS, (502, {}), (403, {"retry-after": "1"}))
    with running_service(app_settings, engine) as client:
        assert deliver(client, issue_payload(github)).status_code == 202
        assert wait_idle(client) == {"done": 1}
    assert len(github.bot_comments(REPO, 42)) == 1
    _, second, third = comment_posts(github)
    assert third - second >= 0.95, "retry-after: 1 is honoured"


def test_an_exhausted_rate_limit_waits_for_its_reset(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    reset = str(int(time.time()) + 1)
    github.fail("GET", f"/repos/{REPO}/issues/42", (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}))
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github))
        assert wait_idle(client) == {"done": 1}
    assert len(github.bot_comments(REPO, 42)) == 1
    reads = [r.at for r in github.requests if r.path == f"/repos/{REPO}/issues/42"]
    assert reads[1] - reads[0] >= 0.95


def test_a_secondary_rate_limit_pauses_every_caller_of_the_installation(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    """The limit answered to one job's comment holds the next job of the same installation too: it makes no
    request until the pause lifts (GitHub counts what is sent meanwhile against the App), and loses nothing."""
    github.fail("POST", COMMENTS, (403, {"retry-after": "30"}, "You have exceeded a secondary rate limit"))
    with running_service(app_settings, engine) as client:
        store = state_of(client).store
        assert deliver(client, issue_payload(github)).status_code == 202
        wait_until(lambda: "secondary rate limit" in str([job.last_error for job in list_jobs(store, "queued")]))
        sent = len(repository_requests(github))
        assert deliver(client, issue_payload(github, number=43)).status_code == 202
        wait_until(lambda: len([job for job in list_jobs(store, "queued") if job.last_error]) == 2)
        jobs = list_jobs(store, "queued")
        assert len(repository_requests(github)) == sent, "the second job asked GitHub nothing"
        assert all(job.attempts == 0 for job in jobs), "a pause spends no attempt"
        with store.transaction() as run:
            due = [row[0] for row in run("SELECT next_attempt_at FROM jobs WHERE status = 'queued'").fetchall()]
        assert min(due) >= time.time() + 20, "both wait for the pause to lift"
    assert github.bot_comments(REPO, 43) == []


def repository_requests(github: FakeGitHub) -> list[object]:
    return [r for r in github.requests if r.path.startswith("/repos/")]


def test_a_retriage_finds_its_comment_by_the_stored_id_while_the_listing_lags(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github))
        wait_idle(client)
        [posted] = github.bot_comments(REPO, 42)
        github.comments[posted["id"]]["_unlisted"] = True  # GitHub's listing does not show it yet
        edited = issue_payload(github, body="Training hangs at step 3 with NCCL 2.18 on 16 GPUs.")
        edited["action"] = "edited"
        deliver(client, edited)
        assert wait_idle(client) == {"done": 2}
    assert [c["id"] for c in github.bot_comments(REPO, 42)] == [posted["id"]], "edited in place, not duplicated"
    assert len(comment_posts(github)) == 1


def test_network_errors_are_retried(app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    github.fail("GET", f"/repos/{REPO}/issues/42", (DROP, {}), (DROP, {}))
    github.fail("POST", COMMENTS, (DROP, {}))
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github))
        assert wait_idle(client) == {"done": 1}
    assert len(github.bot_comments(REPO, 42)) == 1


def test_a_job_that_keeps_failing_is_kept_with_its_error_and_a_redelivery_retries_it(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    github.fail("POST", COMMENTS, *[(500, {})] * app_settings.max_attempts)
    payload = issue_payload(github)
    with running_service(app_settings, engine) as client:
        deliver(client, payload, delivery_id="keeps-failing")
        assert wait_idle(client) == {"failed": 1}
        store = state_of(client).store
        job = store.job(1)
        assert job.attempts == app_settings.max_attempts and "500" in (job.last_error or "")
        assert github.bot_comments(REPO, 42) == []
        again = deliver(client, payload, delivery_id="keeps-failing")
        assert again.status_code == 202 and again.json()["status"] == "requeued"
        assert wait_idle(client) == {"done": 1}
    assert len(github.bot_comments(REPO, 42)) == 1


def test_a_permanent_error_fails_the_job_at_once(app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    payload = issue_payload(github)
    github.repos[REPO].issues.clear()  # the API no longer knows the issue: 404
    with running_service(app_settings, engine) as client:
        deliver(client, payload)
        assert wait_idle(client) == {"failed": 1}
        job = state_of(client).store.job(1)
        assert job.attempts == 1 and "404" in (job.last_error or "")
    assert github.writes() == []


def test_worker_killed_before_the_comment_is_written_ends_in_one_comment_after_restart(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    payload = issue_payload(github)
    with running_service(app_settings, engine, run_worker=False) as client:
        assert deliver(client, payload).status_code == 202
        # a worker took it, then the process died
        claimed = state_of(client).store.claim_job(lease_s=app_settings.job_lease_s)
        assert claimed is not None and claimed.status == "running"
    assert github.writes() == []
    with running_service(app_settings, engine) as client:
        assert wait_idle(client) == {"done": 1}
    assert len(github.bot_comments(REPO, 42)) == 1


def test_worker_killed_after_the_comment_is_written_posts_no_second_one_after_restart(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    payload = issue_payload(github)
    with running_service(app_settings, engine, run_worker=False) as client:
        deliver(client, payload)
        state = state_of(client)
        job = state.store.claim_job(lease_s=app_settings.job_lease_s)
        assert job is not None
        execute_job(state, job)  # the comment is written; the process dies before the job is marked done
        assert state.store.job(job.id).status == "running"
    with running_service(app_settings, engine) as client:
        assert wait_idle(client) == {"done": 1}
    assert len(github.bot_comments(REPO, 42)) == 1
    assert len(comment_posts(github)) == 1


def test_installation_tokens_are_cached_across_jobs(app_settings: Settings, engine: Engine,
                                                    github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        for number in (42, 43, 44):
            deliver(client, issue_payload(github, number=number))
        assert wait_idle(client) == {"done": 3}
    assert len([r for r in github.requests if r.path.startswith("/app/installations/")]) == 1
