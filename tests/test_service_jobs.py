"""Jobs: retries on GitHub's 5xx, rate limits and network errors; crashes and restarts; failures kept."""

from __future__ import annotations

import time

from bot.engine import Engine
from bot.service.handlers.dispatch import execute_job
from bot.settings import Settings
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
