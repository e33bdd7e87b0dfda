"""Coalescing and pacing: a burst of edits of one issue runs one triage of the latest text, superseded jobs
stay visible; a write that is not due yet queues its job again for its booked slot instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.queue.store import Store
from bot.service.queue.upkeep import list_jobs
from bot.service.retention.policy import prune
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
    wait_until,
)
from tests.test_service_leases import url  # noqa: F401  (fixture: SQLite and PostgreSQL)
from tests.test_service_store import postgres_cluster, postgres_server  # noqa: F401  (fixtures)

ISSUE = f"/repos/{REPO}/issues/42"


@pytest.fixture
def store(url: str) -> Iterator[Store]:  # noqa: F811
    opened = Store(url)
    yield opened
    opened.close()


def test_a_newer_triage_delivery_supersedes_the_queued_ones_of_its_issue_and_nothing_else(store: Store) -> None:
    store.record_delivery("d-1", "issues", "opened", "{}", "o/r#1")
    running = store.claim_job()  # leased: runs to its end whatever comes after
    assert running is not None
    for n, action in enumerate(["edited", "edited", "reopened"], start=2):
        store.record_delivery(f"d-{n}", "issues", action, "{}", "o/r#1")
    store.record_delivery("c-1", "issue_comment", "created", "{}", "o/r#1")  # a /triage command is no triage
    store.record_delivery("x-1", "issues", "edited", "{}", "o/r#2")  # another issue
    store.record_delivery("d-5", "issues", "edited", "{}", "o/r#1")
    by_delivery = {job.delivery_id: job for job in list_jobs(store)}
    assert {d: j.status for d, j in by_delivery.items()} == {
        "d-1": "running", "d-2": "superseded", "d-3": "superseded", "d-4": "superseded",
        "c-1": "queued", "x-1": "queued", "d-5": "queued"}
    assert by_delivery["d-4"].last_error is not None and str(by_delivery["d-5"].id) in by_delivery["d-4"].last_error
    assert store.job_counts() == {"running": 1, "superseded": 3, "queued": 3}


def test_a_batch_of_deliveries_keeps_only_the_newest_triage_of_each_issue(store: Store) -> None:
    from bot.service.queue.deliveries import NewDelivery

    batch = [NewDelivery(f"b-{n}", "issues", "edited", "{}", f"o/r#{n % 2}") for n in range(6)]
    assert [new for new, _ in store.record_deliveries(batch)] == [True] * 6
    queued = {job.delivery_id for job in list_jobs(store, "queued")}
    assert queued == {"b-4", "b-5"}
    assert store.job_counts() == {"queued": 2, "superseded": 4}
    assert prune(store, days=30, now=time.time() + 31 * 86400)["jobs"] == 4, "superseded jobs age out like done"


def test_thirty_edits_of_one_issue_end_in_one_comment_on_the_latest_text_and_few_reads(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        first = issue_payload(github)
        held = github.hold("GET", ISSUE)  # the first triage reads the issue while the author keeps editing
        assert deliver(client, first).status_code == 202
        assert held.arrived.wait(30)
        for n in range(1, 30):
            edit = issue_payload(github, "issues-edited",
                                 body=f"Edit {n}: NCCL all_reduce hangs on 2 nodes; a single node works fine.")
            assert deliver(client, edit).status_code == 202
        held.release()
        counts = wait_idle(client, timeout=60)
        decisions = state_of(client).store.decisions(repo=REPO)
    assert counts == {"done": 2, "superseded": 28}
    assert len(github.bot_comments(REPO, 42)) == 1
    reads = [r for r in github.requests if r.method == "GET" and r.path.startswith(ISSUE)]
    assert len(reads) <= 10, [r.path for r in reads]
    assert decisions[0].action == "edited" and github.repos[REPO].issues[42]["body"].startswith("Edit 29:")


def test_a_write_that_is_not_due_queues_its_job_for_its_slot_and_the_worker_runs_other_work_meanwhile(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    interval = 4.0
    settings = app_settings.model_copy(update={"write_interval_s": interval})
    with running_service(settings, engine) as client:
        store = state_of(client).store
        assert deliver(client, issue_payload(github, number=42)).status_code == 202
        wait_until(lambda: len(github.bot_comments(REPO, 42)) == 1)
        assert deliver(client, issue_payload(github, number=43)).status_code == 202
        wait_until(lambda: any(j.write_slot for j in list_jobs(store, "queued")))
        [deferred] = list_jobs(store, "queued")
        assert deferred.attempts == 0 and "paced" in (deferred.last_error or "")
        # Another installation's issue, delivered while #43 waits for its slot, is triaged meanwhile.
        other = issue_payload(github, number=44)
        other["installation"]["id"] += 1
        assert deliver(client, other).status_code == 202
        wait_until(lambda: len(github.bot_comments(REPO, 44)) == 1)
        assert not github.bot_comments(REPO, 43), "#43's slot has not come yet"
        assert wait_idle(client, timeout=30) == {"done": 3}
        triaged = state_of(client).metrics.registry.get_sample_value("ddl_triage_triage_seconds_count")
    posts = {r.path: r.at for r in github.requests if r.method == "POST" and r.path.endswith("/comments")}
    assert posts[f"/repos/{REPO}/issues/43/comments"] - posts[f"/repos/{REPO}/issues/42/comments"] \
        >= interval - 0.25, "one installation's writes stay an interval apart"
    assert len(github.bot_comments(REPO, 43)) == 1
    # The deferred run kept what it had computed: its rerun only wrote (no second read of the issue, of the
    # config, no second triage).
    reads = [r.path for r in github.requests if r.method == "GET"]
    assert reads.count(f"/repos/{REPO}/issues/43") == 1, "the deferred job read its issue once"
    assert reads.count(f"/repos/{REPO}/contents/.github/ddl-triage.yml") == 3, "one config read per issue"
    assert triaged == 3, "one triage per issue"


def test_a_rerun_job_writes_at_its_slot_without_booking_another(tmp_path: Path) -> None:
    from bot.service.errors import WriteDeferred
    from bot.service.github.pacing import holding_write_slot, pace_write

    store = Store(f"sqlite:///{tmp_path / 'pacing.sqlite3'}")
    pace_write(store, 7, 60.0)  # the installation's first write goes at once
    with pytest.raises(WriteDeferred) as deferred:
        pace_write(store, 7, 60.0)
    slot = deferred.value.slot
    assert slot >= time.time() + 59
    with holding_write_slot(time.time()):  # its slot has come (a rerun): it writes, and books nothing
        pace_write(store, 7, 60.0)
        with pytest.raises(WriteDeferred) as again:  # a second write of the same run books its own
            pace_write(store, 7, 60.0)
    assert again.value.slot == pytest.approx(slot + 60.0)
    store.close()
