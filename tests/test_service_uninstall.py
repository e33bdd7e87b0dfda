"""Uninstalling: everything the service keeps of a repository goes (memory, vectors, cursors, cached titles,
decisions, corrections, stored and failed payloads), another repository keeps its own, and a deleted
installation's job asks GitHub for no token (GitHub would answer 404)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from bot.core.settings import Settings
from bot.memory.records import issue_text
from bot.models.embedding import EmbeddingCache, text_hash
from bot.models.engine import Engine
from bot.service.github.issues import listed_issue
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    github_holding,
    issue_payload,
    load_payload,
    running_service,
    state_of,
    wait_idle,
)
from tests.memory_helpers import installation_payload, rows_naming

INSTALLATION = 51000001  # the installation of the payloads in tests/payloads
OTHER = "example-org/other-trainer"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug"], permissions={"bob-maintainer": "write"}) as fake:
        fake.add_repo(OTHER, labels=["bug"])
        fake.seed_issues(REPO, 12, seed=3)
        fake.seed_issues(OTHER, 12, seed=4)
        yield fake


def test_removing_a_repository_then_deleting_the_installation_erases_every_row_and_asks_for_no_token(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_page_interval_s": 0.0})
    with running_service(settings, private_engine) as client:
        deliver(client, installation_payload("created", [REPO, OTHER], installation=INSTALLATION), "installation")
        wait_idle(client, timeout=120)
        deliver(client, issue_payload(github))  # issue 42 of REPO: a comment, a decision, a memory row
        deliver(client, opened_in_other(github, 43))
        deliver(client, command(github, "/triage symptom=out_of_memory"), "issue_comment")  # feedback
        older = text_hash(issue_text(listed_issue(github.repos[REPO].issues[42])))
        # Edited after the correction: the memory and the correction's case hold two texts, each with a vector.
        deliver(client, edited(github, 42))
        github.fail("GET", f"/repos/{REPO}/issues/44", (404, {}, "Not Found"))
        deliver(client, issue_payload(github, number=44, title="Checkpoint loads the wrong shard"))
        counts = wait_idle(client)
        assert counts.get("failed") == 1, "a failed job keeps its payload for an operator, until uninstall"
        memory = state_of(client).memory
        hashes = [older, *(text_hash(issue_text(listed_issue(issue))) for issue in github.repos[REPO].issues.values())]
        assert older not in hashes[1:], "the edit changed the text"
        assert memory.store.count(REPO) == 14 and len(state_of(client).store.feedback_cases()) == 1
        assert memory.store.issue(REPO, 42).signatures, "its NCCL line is remembered (memory_signatures), then erased"  # type: ignore[union-attr]

        deliver(client, installation_payload("removed", [REPO], event="installation_repositories",
                                             installation=INSTALLATION), "installation_repositories")
        wait_idle(client)
        assert rows_naming(settings.sqlite_url, texts_of(github, REPO)) == []
        assert memory.store.count(OTHER) == 13 and state_of(client).store.decisions(repo=OTHER)
        cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite3")
        assert cache.get_many(private_engine.embedder.model_id, hashes) == {}, "its vectors left the cache too"
        cache.close()

    github.fail("POST", f"/app/installations/{INSTALLATION}/access_tokens", *[(404, {}, "Not Found")] * 5)
    with running_service(settings, private_engine) as client:  # a fresh process: no token at hand
        before = len(github.requests)
        deliver(client, installation_payload("deleted", [OTHER], installation=INSTALLATION), "installation")
        assert wait_idle(client) == {"done": 2}, "the removal's job and the deletion's, nothing else is left"
    assert [r.path for r in github.requests[before:] if r.path.startswith("/app/installations")] == []
    assert rows_naming(settings.sqlite_url, texts_of(github, OTHER) + texts_of(github, REPO)) == []


def texts_of(github: FakeGitHub, repo: str) -> list[str]:
    """The repository's name and every title and first body line of its issues."""
    issues = github.repos[repo].issues.values()
    return [repo, *(str(i["title"]) for i in issues), *(str(i["body"]).splitlines()[0] for i in issues if i["body"])]


def opened_in_other(github: FakeGitHub, number: int) -> dict[str, Any]:
    """An `issues.opened` delivery of OTHER (its own text), with the fake's API agreeing about the issue."""
    payload = json.loads(json.dumps(load_payload("issues-opened")).replace(REPO, OTHER))  # its URLs too
    payload["repository"]["name"] = OTHER.split("/")[1]
    payload["issue"] |= {"number": number, "title": "Launcher loses rank 3 after an elastic restart",
                         "body": "After a node restart the elastic agent relaunches but rank 3 never rejoins.",
                         "html_url": f"https://github.com/{OTHER}/issues/{number}"}
    github.add_issue(payload)
    return payload


def edited(github: FakeGitHub, number: int) -> dict[str, Any]:
    """An `issues.edited` delivery of REPO's issue `number`: a line added to its body."""
    body = str(github.repos[REPO].issues[number]["body"])
    return issue_payload(github, "issues-edited", number=number, body=f"{body}\n\nSame hang with NCCL 2.21.5.")


def command(github: FakeGitHub, body: str) -> dict[str, Any]:
    payload = issue_payload(github, "issue-comment-created")
    payload["comment"]["body"] = body
    return payload
