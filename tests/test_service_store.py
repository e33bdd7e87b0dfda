"""The store on SQLite and (when its server binaries are installed) PostgreSQL: one schema, same behaviour."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.decisions.models import Decision
from bot.service.queue.deliveries import NewDelivery
from bot.service.queue.store import Store
from tests.fake_github import FakeGitHub, app_settings_for, deliver, issue_payload, running_service, wait_idle
from tests.services import missing_service


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class PostgresCluster:
    """A running throwaway cluster: its URL (no database name) and `pg_ctl` on its data directory."""

    url: str
    pg_ctl: tuple[str, ...]

    def ctl(self, *args: str) -> None:
        """Run `pg_ctl ARGS` on the cluster (e.g. "-m", "fast", "stop"), waiting until it has done so."""
        subprocess.run([*self.pg_ctl, "-w", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster (initdb + pg_ctl) for this module; without the binaries: skipped, or a
    failure in CI (tests/services.py)."""
    bins = [p for p in sorted(Path("/usr/lib/postgresql").glob("*/bin")) if (p / "initdb").exists()]
    if not bins:
        missing_service("PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin",
                        "install them with `apt-get install postgresql` (Debian, Ubuntu; .ci/run does this)")
    prefix: list[str] = []
    data = Path(tempfile.mkdtemp(prefix="ddl-triage-pg-"))
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            missing_service("running as root and there is no 'postgres' user to run initdb as (initdb refuses root)",
                            "install Debian's postgresql package, which creates it, or run the tests as another user")
        os.chown(data, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    # The server's options and log file are part of the command, so that a restart keeps them.
    run = (*prefix, str(bins[-1] / "pg_ctl"), "-D", str(data / "db"), "-o", f"-p {port} -k {data} -h 127.0.0.1",
           "-l", str(data / "log"))
    subprocess.run([*prefix, str(bins[-1] / "initdb"), "-D", str(data / "db"), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8"], check=True, capture_output=True)
    cluster = PostgresCluster(f"postgresql://postgres@127.0.0.1:{port}", run)
    cluster.ctl("start")
    try:
        yield cluster
    finally:
        subprocess.run([*run, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_server(postgres_cluster: PostgresCluster) -> str:
    """The URL of the module's throwaway PostgreSQL cluster (add a database name with `_new_database`)."""
    return postgres_cluster.url


def _new_database(server: str) -> str:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite3'}"
    return _new_database(request.getfixturevalue("postgres_server"))


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    store = Store(url)
    yield store
    store.close()


def _record(store: Store, delivery: str, issue: str = "o/r#1") -> tuple[bool, int | None]:
    return store.record_delivery(delivery, "issues", "opened", '{"action": "opened"}', issue)


def test_a_delivery_id_is_stored_once(store: Store) -> None:
    new, job_id = _record(store, "d-1")
    assert new and job_id is not None
    assert _record(store, "d-1") == (False, None)
    assert store.job_counts() == {"queued": 1}
    assert store.delivery_payload("d-1") == '{"action": "opened"}'


def test_claiming_is_atomic_across_connections(store: Store, url: str) -> None:
    for i in range(24):
        _record(store, f"d-{i}", issue=f"o/r#{i}")
    claimed: list[int] = []
    lock = threading.Lock()

    def drain() -> None:
        mine = Store(url)
        while (job := mine.claim_job()) is not None:
            with lock:
                claimed.append(job.id)
            mine.finish_job(job.id, job.lease_token)
        mine.close()

    threads = [threading.Thread(target=drain) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 24
    assert store.job_counts() == {"done": 24}


def test_one_issue_never_has_two_jobs_running(store: Store) -> None:
    """Two replicas must not race for one issue's comment (a query rule, and a unique index behind it)."""
    _record(store, "opened", issue="o/r#7")
    first = store.claim_job()
    _record(store, "edited", issue="o/r#7")  # arrives while the first runs: a running job is never superseded
    assert first is not None and first.delivery_id == "opened"
    assert store.claim_job() is None
    with pytest.raises(Exception, match=r"(?i)unique"), store._tx() as run:
        run("UPDATE jobs SET status = 'running' WHERE delivery_id = 'edited'")
    store.finish_job(first.id, first.lease_token)
    second = store.claim_job()
    assert second is not None and second.delivery_id == "edited"


def test_jobs_left_running_are_queued_again_once_their_lease_is_gone(store: Store, url: str) -> None:
    _record(store, "d-1")
    job = store.claim_job(lease_s=30)
    assert job is not None and job.attempts == 1
    restarted = Store(url)
    assert restarted.requeue_running() == 0, "the lease still runs: another replica may be running it"
    later = time.time() + 31
    assert restarted.requeue_running(now=later) == 1
    again = restarted.claim_job(now=later)
    assert again is not None and again.id == job.id and again.attempts == 2
    restarted.close()


def test_a_retry_waits_until_it_is_due(store: Store) -> None:
    _record(store, "d-1")
    job = store.claim_job()
    assert job is not None
    store.retry_job(job.id, job.lease_token, "GitHub answered 502", 60.0)
    assert store.claim_job() is None
    due = store.claim_job(now=time.time() + 61)
    assert due is not None and due.last_error == "GitHub answered 502"


def test_a_failed_job_keeps_its_error_and_a_redelivery_queues_it_again(store: Store) -> None:
    _record(store, "d-1")
    job = store.claim_job()
    assert job is not None
    store.fail_job(job.id, job.lease_token, "GitHub answered 500 (after 6 attempts)")
    kept = store.job(job.id)
    assert kept.status == "failed" and "after 6 attempts" in (kept.last_error or "")
    assert _record(store, "d-1") == (False, job.id)
    assert store.job(job.id).status == "queued" and store.job(job.id).attempts == 0


def test_a_batch_stores_new_deliveries_in_order_and_answers_seen_ones_like_single_ones(store: Store) -> None:
    """The webhook's group commit (one statement per row on SQLite, set-based on PostgreSQL) gives what a
    delivery at a time would: new ids get jobs in arrival order, an id twice in one batch is stored once,
    a seen id is a duplicate unless its job had failed for good (then it is queued again)."""
    _record(store, "seen", issue="o/r#seen")  # two issues: a newer triage of one issue supersedes a queued one
    _record(store, "failed", issue="o/r#failed")
    job = store.claim_job()
    assert job is not None and job.delivery_id == "seen"
    store.finish_job(job.id, job.lease_token)
    failed = store.claim_job()
    assert failed is not None and failed.delivery_id == "failed"
    store.fail_job(failed.id, failed.lease_token, "GitHub answered 500")

    def new(delivery: str) -> NewDelivery:
        return NewDelivery(delivery, "issues", "opened", '{"action": "opened"}', f"o/r#{delivery}")

    results = store.record_deliveries([new("a"), new("seen"), new("b"), new("a"), new("failed"), new("c")])
    assert [r[0] for r in results] == [True, False, True, False, False, True]
    assert results[1] == (False, None) and results[3] == (False, None) and results[4] == (False, failed.id)
    a, b, c = results[0][1], results[2][1], results[5][1]
    assert a is not None and b is not None and c is not None and a < b < c
    assert store.job_counts() == {"done": 1, "queued": 4}


def test_decisions_and_feedback_round_trip(store: Store) -> None:
    _record(store, "d-1")
    decision = Decision(delivery_id="d-1", repo="o/r", number=1, event="issues", action="opened", shadow=True,
                        posted=False, predictions={"kind": {"label": "bug_report", "confidence": 0.9}},
                        neighbours=[], comment="text")
    store.save_decision(decision)
    store.save_decision(decision.model_copy(update={"comment": "retried"}))
    [saved] = store.decisions()
    assert saved.comment == "retried" and saved.created_at > 0 and store.decisions(repo="x/y") == []
    store.save_feedback("c-1", "o/r", 1, "bob", "title", "body", {"symptom": "hang_timeout"})
    store.save_feedback("c-1", "o/r", 1, "bob", "title", "body", {"symptom": "hang_timeout"})
    store.save_feedback("c-2", "o/r", 1, "dana", "title", "body", {"symptom": "out_of_memory"})
    assert store.corrections("o/r", 1) == {"symptom": "out_of_memory"}
    assert [case["value"] for case in store.feedback_cases()] == ["hang_timeout", "out_of_memory"]


def test_the_service_runs_on_postgresql(settings: Settings, engine: Engine, postgres_server: str,
                                        tmp_path: Path) -> None:
    with FakeGitHub().running() as github:
        github.add_repo("example-org/fastdist")
        payload = issue_payload(github)
        app_settings = app_settings_for(settings, github, tmp_path, database_url=_new_database(postgres_server))
        with running_service(app_settings, engine) as client:
            assert deliver(client, payload, delivery_id="pg-1").status_code == 202
            assert deliver(client, payload, delivery_id="pg-1").json()["status"] == "duplicate"
            assert wait_idle(client) == {"done": 1}
        assert len(github.bot_comments("example-org/fastdist", 42)) == 1
