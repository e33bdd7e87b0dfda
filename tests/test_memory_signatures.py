"""The repository memory remembers each issue's error signatures (on sync and on every lifecycle upsert,
replaced when the text changes, erased with the issue or the repository), and a new issue finds the
repository's issues that failed the same way even when its wording keeps them under the cosine floor."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.domain import Issue
from bot.core.settings import Settings
from bot.memory.index import MemoryIndex
from bot.memory.labels import LabelModels
from bot.memory.queries import Memory, related_issues
from bot.memory.store import MemoryStore
from bot.memory.sync import sync_repository
from bot.models.engine import Engine
from bot.reading.normalise import normalise
from bot.reading.signatures import signature
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    github_holding,
    load_payload,
    running_service,
    state_of,
    wait_idle,
)
from tests.memory_helpers import installation_client, installation_payload, rows_naming
from tests.test_memory_store import issue as stored_issue
from tests.test_memory_store import unit
from tests.test_service_store import postgres_cluster, postgres_server, url  # noqa: F401  (fixtures: both engines)

SEVEN = re.compile(r"#7\b")  # the synced issue 7, as the comment links an issue of the repository itself
NCCL_CRASH = "ncclUnhandledCudaError"
NCCL_EXCEPTION = "DistBackendError: NCCL error in: <PATH>, unhandled cuda error"
CHECKPOINT_CRASH = {  # closed, fixed by #4290: written for this test, no gold text
    "number": 7, "title": "Saving a ZeRO-3 checkpoint crashes the whole job",
    "body": "I train a 7B model with ZeRO stage 3 on 2 nodes. When the engine saves the first checkpoint at "
            "step 1000 every rank dies:\n\n```\nTraceback (most recent call last):\n"
            '  File "/home/me/train.py", line 212, in <module>\n    engine.save_checkpoint(args.save_dir)\n'
            '  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 3055, in '
            "save_checkpoint\n    dist.barrier()\ntorch.distributed.DistBackendError: NCCL error in: "
            "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n```\ndeepspeed 0.12.6, torch 2.2.0"}
SAME_ERROR_OTHER_WORDS = Issue(
    title="Question: should the eval batch size match the training batch size with pipeline stages?",
    body="With 4 pipeline stages my validation pass breaks after 500 iterations; the data loader streams shards "
         "from object storage and tokenises the evaluation set on the fly. Rank 5 prints:\n\n```\n[rank5]: "
         "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
         "unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
         "NCCL version 2.21.5\n```\n"
         "Is there a recommended eval micro-batch setting?")
NOTHING_SHARED = Issue(title="The curriculum learning config keys are not documented",
                       body="The docs do not say which keys the curriculum scheduler accepts. Could you add an "
                            "example of a config that ramps the sequence length?")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["bug"]) as fake:
        fake.seed_issues(REPO, 6, seed=7)
        crash = fake.put_issue(REPO, copy.deepcopy(CHECKPOINT_CRASH) | {
            "state": "open", "state_reason": None, "labels": [], "created_at": "2024-04-01T00:00:00Z",
            "updated_at": "2024-04-01T00:00:00Z", "closed_at": None})
        fake.close_issue(REPO, crash, "completed", fixed_by=4290)
        yield fake


def signature_rows(store: MemoryStore, repo: str, number: int) -> list[str]:
    stored = store.issue(repo, number)
    return sorted(s.text for s in stored.signatures) if stored else []


def test_signature_rows_are_written_replaced_and_deleted_with_their_issue_per_repository(url: str) -> None:  # noqa: F811
    store = MemoryStore(url)
    crash, oom = signature("nccl", NCCL_CRASH), signature("cuda", "CUDA out of memory")
    try:
        store.upsert([(stored_issue("org/a", 1, signatures=(crash,)), unit(1)),
                      (stored_issue("org/a", 2, signatures=(crash, oom)), unit(2)),
                      (stored_issue("org/b", 1, signatures=(crash,)), unit(3))])
        assert signature_rows(store, "org/a", 2) == ["CUDA out of memory", NCCL_CRASH]
        assert store.sharing("org/a", [crash.digest]) == [1, 2]
        assert store.sharing("org/a", [crash.digest], exclude=1, before=2.0) == []
        store.upsert([(stored_issue("org/a", 2, signatures=(oom,)), unit(2))])  # edited: the NCCL line is gone
        assert store.sharing("org/a", [crash.digest]) == [1] and signature_rows(store, "org/a", 2) == [oom.text]
        assert store.issues_by_number("org/a", [2])[2].signatures == (oom,)
        store.delete_issue("org/a", 1)
        assert store.sharing("org/a", [crash.digest]) == [] and store.sharing("org/b", [crash.digest]) == [1]
        store.delete_repo("org/a")
        assert store.sharing("org/a", [oom.digest]) == [] and store.sharing("org/b", [crash.digest]) == [1]
    finally:
        store.close()


def test_a_sync_keeps_the_matching_signatures_and_no_bare_signal(
        github: FakeGitHub, engine: Engine, tmp_path: Path) -> None:
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite3'}")
    try:
        sync_repository(installation_client(github), store, engine.embedder, REPO)
        assert signature_rows(store, REPO, 7) == sorted([NCCL_EXCEPTION, NCCL_CRASH])
        assert all(not i.signatures for i in store.issues(REPO) if i.number != 7), "the seeded issues show none"
    finally:
        store.close()


def synced_memory(github: FakeGitHub, engine: Engine, tmp_path: Path) -> Memory:
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite3'}")
    sync_repository(installation_client(github), store, engine.embedder, REPO)
    return Memory(store, MemoryIndex(store), LabelModels(store.vectors, store.count))


def related_to(memory: Memory, settings: Settings, engine: Engine, issue: Issue) -> tuple[list[Any], float]:
    """The related issues of `issue` and its cosine to the closed checkpoint crash."""
    normalised = normalise(issue)
    vector = engine.embedder.embed([normalised.text])[0]
    [(_, cosine)] = memory.index.scored(REPO, vector, [7])
    return related_issues(memory, settings, REPO, 99, vector, normalised.signatures), cosine


def test_a_new_issue_with_other_words_and_the_same_error_finds_the_closed_issue_under_the_floor(
        github: FakeGitHub, engine: Engine, settings: Settings, tmp_path: Path) -> None:
    memory = synced_memory(github, engine, tmp_path)
    try:
        related, cosine = related_to(memory, settings, engine, SAME_ERROR_OTHER_WORDS)
        assert cosine < settings.memory_related_floor, "its wording alone would never show it"
        [found] = related
        assert (found.number, found.state, found.state_reason, found.closed_by) == (7, "closed", "completed", "#4290")
        assert found.signature == NCCL_EXCEPTION and found.score == pytest.approx(cosine, abs=1e-4)

        related, _ = related_to(memory, settings, engine, NOTHING_SHARED)
        assert related == []
    finally:
        memory.close()


def test_the_lifecycle_replaces_an_edited_issues_signatures_and_uninstalling_erases_them(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"memory_page_interval_s": 0.0})
    with running_service(settings, engine) as client:
        deliver(client, installation_payload("created", [REPO]), "installation")
        wait_idle(client, timeout=120)
        store = state_of(client).memory.store
        assert signature_rows(store, REPO, 7) == sorted([NCCL_EXCEPTION, NCCL_CRASH])

        oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
        # A label added after the author edited the text: the payload carries the text as it is now.
        deliver(client, lifecycle_event("labeled", 7, body=f"It was an OOM after all:\n```\n{oom}\n```"))
        wait_idle(client)
        assert signature_rows(store, REPO, 7) == ["CUDA out of memory", "OutOfMemoryError: CUDA out of memory"]
        assert store.sharing(REPO, [signature("nccl", NCCL_CRASH).digest]) == []

        deliver(client, installation_payload("removed", [REPO], event="installation_repositories"),
                "installation_repositories")
        wait_idle(client)
        assert store.sharing(REPO, [signature("cuda", "CUDA out of memory").digest]) == []
    assert rows_naming(settings.sqlite_url, [REPO, "CUDA out of memory"]) == []


def lifecycle_event(action: str, number: int, **issue: Any) -> dict[str, Any]:
    payload = copy.deepcopy(load_payload("issues-opened"))
    payload["action"] = action
    payload["issue"].update(number=number, title=CHECKPOINT_CRASH["title"], labels=[{"name": "bug"}], **issue)
    return payload


def test_the_cli_triage_and_predict_use_the_synced_history_of_the_issues_repository(
        github: FakeGitHub, engine: Engine, settings: Settings, tmp_path: Path) -> None:
    db = tmp_path / "memory.sqlite3"
    store = MemoryStore(f"sqlite:///{db}")
    sync_repository(installation_client(github), store, engine.embedder, REPO)  # as `ddl-triage history sync`
    store.close()
    env = {**os.environ, "DDL_TRIAGE_STATE_DIR": str(settings.state_dir), "DDL_TRIAGE_DATABASE_URL": f"sqlite:///{db}",
           "DDL_TRIAGE_DATA_DIR": str(settings.data_dir)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True, text=True, env=env,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        return done

    shown = json.loads(cli("triage", "--json", "--repo", REPO, "--title", SAME_ERROR_OTHER_WORDS.title,
                           "--body", SAME_ERROR_OTHER_WORDS.body).stdout)
    assert [(r["number"], r["signature"]) for r in shown["related"]] == [(7, NCCL_EXCEPTION)]

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = (("same", REPO, SAME_ERROR_OTHER_WORDS), ("unsynced", "org/elsewhere", SAME_ERROR_OTHER_WORDS),
             ("unrelated", REPO, NOTHING_SHARED))
    src.write_text("".join(json.dumps({"id": name, "repo": repo, "title": issue.title, "body": issue.body}) + "\n"
                           for name, repo, issue in lines))
    cli("predict", "--with-comment", "--input", str(src), "--output", str(out))
    same, unsynced, unrelated = (json.loads(line)["comment"] or "" for line in out.read_text().splitlines())
    # The memory recalls #7 by the shared NCCL error (above), but an unhandled CUDA error inside NCCL names only the
    # symptom: with other words it is not the same failure, so the comment does not cite #7 (issue #21).
    assert not SEVEN.search(same) and not SEVEN.search(unsynced) and not SEVEN.search(unrelated)
