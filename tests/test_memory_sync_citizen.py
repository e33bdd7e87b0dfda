"""History sync as a good citizen, against the fake GitHub: one page budget per job across its repositories,
a rate limit met (or nearly met) reschedules the job for the reset instead of sleeping in the worker, a
refused token is replaced once, and a continuation's id and payload stay small whatever the installation."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from urllib.parse import parse_qsl

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.queue.upkeep import list_jobs
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    github_holding,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
    wait_until,
)
from tests.memory_helpers import installation_payload, listing_pages

OTHER = "example-org/second"
SEEDED = 150  # two pages of 100
INSTALLATION = 51000001  # the installation of the issue payloads: one client, one cached token
TOKENS = f"/app/installations/{INSTALLATION}/access_tokens"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug", "question"]) as fake:
        fake.add_repo(OTHER, labels=["bug"])
        fake.seed_issues(REPO, SEEDED)
        fake.seed_issues(OTHER, SEEDED)
        yield fake


def listings(github: FakeGitHub) -> list[tuple[str, int]]:
    """(repository, page) of every issue listing, in order."""
    return [(r.path.split("/")[3], int(dict(parse_qsl(r.query)).get("page", 1))) for r in github.requests
            if r.method == "GET" and r.path.endswith("/issues") and r.path.startswith("/repos/")]


def test_one_page_budget_covers_every_repository_of_a_job_and_the_continuation_stays_small(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_sync_pages_per_job": 3, "memory_page_interval_s": 0.0})
    with running_service(settings, engine) as client:
        assert deliver(client, installation_payload("created", [REPO, OTHER]), "installation").status_code == 202
        counts = wait_idle(client, timeout=120)
        state = state_of(client)
        jobs = sorted(list_jobs(state.store), key=lambda job: job.id)
        memory = state.memory
        assert memory.store.count(REPO) == SEEDED and memory.store.count(OTHER) == SEEDED
        continuation = json.loads(state.store.delivery_payload(jobs[1].delivery_id))
    assert counts == {"done": 2}, "4 pages at 3 per job: the installation's job, then one continuation"
    assert listings(github) == [("fastdist", 1), ("fastdist", 2), ("second", 1), ("second", 2)]
    assert len(jobs[1].delivery_id) <= len(jobs[0].delivery_id) + 16
    assert REPO not in json.dumps(continuation) and OTHER not in json.dumps(continuation)


def test_the_rate_limits_reserve_reschedules_the_sync_for_the_reset_and_triage_goes_on_meanwhile(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_page_interval_s": 0.0})
    github.limit_rate(remaining=130, reset_in_s=3600)  # page 1 and 29 of its 44 timelines reach the reserve
    with running_service(settings, engine) as client:
        store, memory = state_of(client).store, state_of(client).memory
        assert deliver(client, installation_payload("created", [REPO]), "installation").status_code == 202
        wait_until(lambda: "rate limit" in str([job.last_error for job in list_jobs(store, "queued")]))
        [waiting] = list_jobs(store, "queued")
        with store.transaction() as run:
            due = run("SELECT next_attempt_at FROM jobs WHERE id = ?", (waiting.id,)).fetchone()[0]
        assert due >= time.time() + 3500 and waiting.attempts == 0, "queued for the reset, no attempt spent"
        cursor = memory.store.cursor(REPO)
        assert cursor is not None and (cursor.status, cursor.page) == ("running", 1)
        assert 29 <= memory.store.count(REPO) < 100, "the issues read before the reserve are kept"
        assert github.rate_remaining() == 100, "checked before every request: not one past the reserve"
        # The worker is free: an issue delivered now is triaged while the sync waits for the reset.
        assert deliver(client, issue_payload(github)).status_code == 202
        wait_until(lambda: len(github.bot_comments(REPO, 42)) == 1)
    assert listing_pages(github, REPO) == [1]


def test_a_403_rate_limit_mid_sync_resumes_at_its_page_after_the_reset(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_page_interval_s": 0.0})
    reset = str(int(time.time()) + 2)
    with running_service(settings, engine) as client:
        memory = state_of(client).memory
        hold = github.hold("GET", f"/repos/{REPO}/issues", after=True)
        assert deliver(client, installation_payload("created", [REPO]), "installation").status_code == 202
        assert hold.arrived.wait(30)
        github.fail("GET", f"/repos/{REPO}/issues", (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
                                                     "API rate limit exceeded"))
        hold.release()  # page 1 is answered; page 2 meets the exhausted limit
        assert wait_idle(client, timeout=120) == {"done": 1}
        assert memory.store.count(REPO) == SEEDED
        [job] = list_jobs(state_of(client).store)
    assert job.attempts == 1, "a rate limit gives its attempt back"
    assert listing_pages(github, REPO) == [1, 2, 2]


def test_a_refused_token_is_replaced_once_and_the_job_goes_on(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_page_interval_s": 0.0})
    with running_service(settings, engine) as client:
        store, memory = state_of(client).store, state_of(client).memory
        assert deliver(client, issue_payload(github)).status_code == 202
        assert wait_idle(client) == {"done": 1}
        github.revoke_tokens()  # the cached token is still "valid" by its expiry: GitHub refuses it (401)
        delivery = installation_payload("created", [REPO], installation=INSTALLATION)
        assert deliver(client, delivery, "installation").status_code == 202
        assert wait_idle(client, timeout=120) == {"done": 2}
        assert memory.store.count(REPO) == SEEDED
        assert all(job.attempts == 1 for job in list_jobs(store))
        # Refused again with the fresh token: a second 401 is not retried.
        github.fail("GET", f"/repos/{REPO}/issues/43", (401, {}, "Bad credentials"), (401, {}, "Bad credentials"))
        assert deliver(client, issue_payload(github, number=43)).status_code == 202
        assert wait_idle(client) == {"done": 2, "failed": 1}
    token_requests = [r for r in github.requests if r.method == "POST" and r.path == TOKENS]
    assert len(token_requests) == 3, "one token, one after the revocation, one after the first 401 of #43"
