"""Retention and erasure, one owner (`bot/service/retention/`): a deleted issue takes its corrections and
decisions with it (from every worker's case base too), a triage running during an uninstall stores nothing
after the erasure, and erasing 200 repositories in small transactions never makes intake answer 503."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from bot.core.settings import Settings
from bot.core.storage.database import connect_sqlite
from bot.memory.records import issue_text
from bot.models.embedding import EmbeddingCache, text_hash
from bot.models.engine import Engine
from bot.service.github.issues import listed_issue
from bot.service.handlers.feedback import LearnedCorrections
from bot.service.retention.erasure import erase_repositories
from bot.service.retention.policy import RETENTION, prune
from tests.fake_github import (
    COMMENTS,
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
from tests.memory_helpers import installation_payload

INSTALLATION = 51000001  # the installation of the payloads in tests/payloads
ERASED = 200
PER_REPO = 300  # deliveries (with jobs and decisions) and memory rows per repository


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug"], permissions={"bob-maintainer": "write"}) as fake:
        yield fake


def command(github: FakeGitHub, body: str) -> dict[str, Any]:
    payload = issue_payload(github, "issue-comment-created")
    payload["comment"]["body"] = body
    return payload


def rows_of(settings: Settings, table: str, repo: str) -> int:
    conn = connect_sqlite(settings.sqlite_url, busy_timeout_s=30.0)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE repo = ?", (repo,)).fetchone()[0])
    finally:
        conn.close()


def test_a_deleted_issue_takes_its_corrections_and_decisions_from_the_database_and_every_case_base(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, private_engine) as client:
        state = state_of(client)
        deliver(client, issue_payload(github))
        deliver(client, command(github, "/triage symptom=out_of_memory"), "issue_comment")
        wait_idle(client, timeout=180)
        case_id = f"{REPO}#42"
        assert case_id in {c.id for c in private_engine.index.cases}
        texts = [text_hash(issue_text(listed_issue(github.repos[REPO].issues[42])))]
        body = str(github.repos[REPO].issues[42]["body"])
        deliver(client, issue_payload(github, "issues-edited", body=f"{body}\n\nAlso on NCCL 2.21.5."))
        wait_idle(client, timeout=180)
        texts.append(text_hash(issue_text(listed_issue(github.repos[REPO].issues[42]))))
        cache = EmbeddingCache(app_settings.cache_dir / "embeddings.sqlite3")
        assert set(cache.get_many(private_engine.embedder.model_id, texts)) == set(texts), "both texts embedded"
        # A worker's catch-up of its case base, as each one does before its next triage.
        other = LearnedCorrections(state.store, app_settings.github_api_url)
        size = len(private_engine.index.cases)
        deleted = issue_payload(github)
        deleted["action"] = "deleted"
        deliver(client, deleted)
        wait_idle(client, timeout=180)
        assert rows_of(app_settings, "feedback", REPO) == 0 and rows_of(app_settings, "decisions", REPO) == 0
        assert state.memory.store.issue(REPO, 42) is None
        assert cache.get_many(private_engine.embedder.model_id, texts) == {}, "the vectors of both its texts went"
        cache.close()
        other.catch_up(private_engine)
        assert case_id not in {c.id for c in private_engine.index.cases}
        assert len(private_engine.index.cases) == size - 1 and case_id not in private_engine.private_cases
        assert len(private_engine.index.vectors) == len(private_engine.index.cases)


def test_a_triage_running_during_an_uninstall_stores_nothing_after_the_erasure(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    hold = github.hold("POST", COMMENTS)  # the triage has stored its memory row and is about to comment
    with running_service(app_settings, engine) as client:
        state = state_of(client)
        deliver(client, issue_payload(github))
        assert hold.arrived.wait(60)
        assert state.memory.store.issue(REPO, 42) is not None
        # Another worker runs the uninstall meanwhile.
        erase_repositories(state.store, state.memory, engine.embedder, [REPO], "the-uninstall", INSTALLATION,
                           whole_installation=True)
        assert state.memory.store.issue(REPO, 42) is None
        hold.release()
        wait_idle(client, timeout=180)
        assert state.store.job_counts() == {"done": 1}
        assert rows_of(app_settings, "decisions", REPO) == 0, "no decision after the erasure"
        assert rows_of(app_settings, "memory_issues", REPO) == 0
        assert state.memory.store.cursor(REPO) is None


def seed_repositories(settings: Settings, repos: list[str], per_repo: int) -> None:
    """What a busy installation leaves: per repository, finished deliveries with jobs, decisions, corrections and
    memory rows (written directly: the erasure, not the seeding, is under test)."""
    conn = connect_sqlite(settings.sqlite_url, busy_timeout_s=30.0)
    now = time.time()
    vector = np.zeros(384, dtype=np.float32).tobytes()
    body = json.dumps({"action": "opened", "issue": {"title": "t", "body": "b" * 400}})
    with conn:
        for r, repo in enumerate(repos):
            ids = [f"seed-{r}-{n}" for n in range(per_repo)]
            conn.executemany("INSERT INTO deliveries (id, event, action, payload, received_at) VALUES (?, ?, ?, ?, ?)",
                             [(i, "issues", "opened", body.replace('"opened"', f'"opened", "repository": '
                                                                   f'{{"full_name": "{repo}"}}'), now) for i in ids])
            conn.executemany("INSERT INTO jobs (delivery_id, event, action, issue_key, status, next_attempt_at, "
                             "received_at, updated_at) VALUES (?, 'issues', 'opened', ?, 'done', ?, ?, ?)",
                             [(i, f"{repo}#{n}", now, now, now) for n, i in enumerate(ids)])
            conn.executemany("INSERT INTO decisions (delivery_id, repo, number, created_at, decision) "
                             "VALUES (?, ?, ?, ?, '{}')", [(i, repo, n, now) for n, i in enumerate(ids)])
            conn.executemany("INSERT INTO feedback (delivery_id, repo, number, axis, value, author, title, body, "
                             "created_at) VALUES (?, ?, ?, 'symptom', 'hang_timeout', 'm', 't', 'b', ?)",
                             [(i, repo, n, now) for n, i in enumerate(ids[:10])])
            conn.executemany("INSERT INTO memory_issues (repo, number, type, title, state, labels, created_at, "
                             "text_hash, vector, updated_at) VALUES (?, ?, 'issue', 't', 'open', '[]', ?, ?, ?, ?)",
                             [(repo, n, now, f"{r}-{n}", vector, now) for n in range(per_repo)])
    conn.close()


def test_erasing_200_repositories_while_deliveries_arrive_never_makes_intake_refuse(
        app_settings: Settings, engine: Engine, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """Intake waits at most `ack_timeout_s` (1 s here) for the database; the erasure's transactions are small
    enough that every delivery arriving meanwhile is stored and answered 202. (Batches of 50 rows here, not
    500: the same guarantee, over more transactions, so that deliveries surely arrive while it runs.)"""
    monkeypatch.setattr("bot.service.retention.batches.BATCH", 50)
    monkeypatch.setattr("bot.memory.forget.BATCH", 50)
    settings = app_settings.model_copy(update={"ack_timeout_s": 1.0})
    repos = [f"example-org/erased-{n:03d}" for n in range(ERASED)]
    answers: list[tuple[int, bool]] = []  # (status, whether the erasure was under way when it was sent)
    stop = threading.Event()
    with running_service(settings, engine) as client:
        seed_repositories(settings, repos, per_repo=PER_REPO)
        store = state_of(client).store

        def under_way() -> bool:
            with store.transaction() as run:
                started = run("SELECT COUNT(*) FROM erasures").fetchone()[0]
                left = run("SELECT COUNT(*) FROM decisions WHERE repo = ?", (repos[-1],)).fetchone()[0]
            return bool(started and left)

        def uninstall_status() -> str | None:
            with store.transaction() as run:
                row = run("SELECT status FROM jobs WHERE delivery_id = 'the-uninstall'").fetchone()
            return None if row is None else str(row[0])

        def arrive() -> None:  # deliveries keep arriving, before, during and after the erasure
            while not stop.is_set():
                during = under_way()
                status = deliver(client, issue_payload(github), delivery_id=f"live-{len(answers)}").status_code
                answers.append((status, during))

        sender = threading.Thread(target=arrive)
        sender.start()
        try:
            uninstall = installation_payload("deleted", repos, installation=INSTALLATION)
            assert deliver(client, uninstall, "installation", delivery_id="the-uninstall").status_code == 202
            wait_until(lambda: uninstall_status() == "done", timeout=600)
        finally:
            stop.set()
            sender.join()
        wait_idle(client, timeout=180)
    during = [status for status, under in answers if under]
    assert during, f"no delivery arrived during the erasure ({len(answers)} in all)"
    assert {status for status, _ in answers} == {202}, (len(answers), [(s, u) for s, u in answers if s != 202])
    assert all(rows_of(settings, table, repo) == 0 for repo in repos[::37]
               for table in ("decisions", "feedback", "memory_issues"))
    conn = connect_sqlite(settings.sqlite_url, busy_timeout_s=30.0)
    assert conn.execute("SELECT COUNT(*) FROM jobs WHERE issue_key LIKE 'example-org/erased-%'").fetchone()[0] == 0
    conn.close()


def test_the_retention_table_names_every_table_of_the_database(app_settings: Settings, engine: Engine) -> None:
    with running_service(app_settings, engine) as client:
        assert set(prune(state_of(client).store, days=30).values()) == {0}
    conn = connect_sqlite(app_settings.sqlite_url, busy_timeout_s=30.0)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    named = {name.strip() for kept in RETENTION for name in kept.table.split(",")}
    assert tables - {"sqlite_sequence"} == named
