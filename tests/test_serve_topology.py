"""The App as it is deployed: `ddl-triage serve --workers 2` (a web process and two worker processes, each
state built by `build_state`) against the fake GitHub, from install to uninstall. Every handler runs in a
worker process, never in the test's: the repository memory, the corrections and the metrics must work
across processes."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.comment.policy import SILENT_FIRST_STEP, SILENT_MEMBER, SILENT_NEVER, SILENT_NOTHING
from bot.deciding.repo_config import CONFIG_PATH
from bot.memory.store import MemoryStore
from bot.service.decisions.models import Decision
from bot.service.queue.store import Store
from tests.fake_github import REPO, FakeGitHub, github_holding, issue_payload, load_payload
from tests.memory_helpers import installation_payload, listing_pages, rows_naming
from tests.serve_process import Served, paused, serve_environment, serving, standalone_workers
from tests.test_service_comment_policy import NOTHING_TO_ADD

INSTALLATION = 51000001  # the installation of the payloads in tests/payloads
CORRECTED = "out_of_memory"  # a symptom the engine does not give the payload's NCCL timeout by itself
SAME_ERROR_OTHER_WORDS = {
    "title": "Resuming from a checkpoint on 4 nodes never finishes the first optimizer step",
    "body": "After loading the step-12000 checkpoint with ZeRO-2 offload, the loss for the first batch is printed "
            "and then nothing more. Ten minutes later rank 11 logs:\n\n```\n[rank11]:[E ProcessGroupNCCL.cpp:607] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, "
            "Timeout(ms)=600000) ran for 600412 milliseconds before timing out.\n```\n\nfastdist 0.9.4, torch 2.4.1"}


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """REPO with a history: 30 made-up issues, and a closed near-copy (#31) of the payload's issue, fixed by
    pull request #4290 as its timeline says."""
    with github_holding(labels=["bug", "nccl"], permissions={"bob-maintainer": "write"}) as fake:
        fake.seed_issues(REPO, 30, seed=1)
        opened = load_payload("issues-opened")["issue"]
        twin = {"number": 31, "title": opened["title"], "body": opened["body"] + "\nSame here.", "state": "open",
                "state_reason": None, "labels": [{"name": "nccl"}], "created_at": "2024-04-01T00:00:00Z",
                "updated_at": "2024-04-01T00:00:00Z", "closed_at": None}
        fake.put_issue(REPO, twin)
        fake.close_issue(REPO, twin, "completed", fixed_by=4290)
        yield fake


def test_serve_with_two_worker_processes_installs_syncs_cites_learns_and_uninstalls(
        github: FakeGitHub, tmp_path: Path) -> None:
    started = time.monotonic()
    # Workers at the test's own priority: at the default nice 19 a CI machine busy with other work starves them.
    with serving(github, tmp_path, workers=2, worker_niceness="0") as served:
        ready = time.monotonic()
        first, second = served.worker_pids()

        # Install: the history sync runs in a worker and reads the repository's issues and timelines.
        assert served.deliver(installation_payload("created", [REPO], installation=INSTALLATION),
                              "installation").status_code == 202
        assert served.wait_idle() == {"done": 1}
        assert listing_pages(github, REPO) == [1]
        assert memory_count(served) == 31

        # A near-copy of closed #31 is opened: its comment cites #31 and the pull request that fixed it.
        assert served.deliver(issue_payload(github)).status_code == 202
        served.wait_idle()
        [comment] = github.bot_comments(REPO, 42)
        cited = next(line for line in comment["body"].splitlines() if "#31" in line)
        assert "fixed by #4290" in cited

        # Another author, other words (cosine 0.74 to #31, under the related floor), the same watchdog timeout:
        # a timeout is the symptom, not the mechanism, so #31 and its fix are no precedent (issue #21), and the
        # watchdog's step only localises a timeout: nothing is a reason to speak, and the decision says so.
        served.deliver(issue_payload(github, number=46, **SAME_ERROR_OTHER_WORDS))
        served.wait_idle()
        other = latest_decision(served, 46)
        assert github.bot_comments(REPO, 46) == [] and other["outcome"] == SILENT_FIRST_STEP
        assert other["reasons"] == [] and other["predictions"]["symptom"]["label"] == "hang_timeout"

        # A label change reaches the memory.
        served.deliver(issue_event("labeled", 42, labels=[{"name": "bug"}, {"name": "nccl"}]))
        served.wait_idle()
        assert memory_labels(served, 42) == ["bug", "nccl"]

        # A correction handled by one worker is seen by a triage on the other.
        with paused(second, served.databases):
            served.deliver(command(github, f"/triage symptom={CORRECTED}"), "issue_comment")
            served.wait_idle()
        with paused(first, served.databases):
            near_copy = issue_payload(github, number=43, body=load_payload("issues-opened")["issue"]["body"] + "\n")
            served.deliver(near_copy)
            served.wait_idle()
        decision = latest_decision(served, 43)
        assert decision["predictions"]["symptom"]["label"] == CORRECTED
        assert f"{REPO}#42" in [n["id"] for n in decision["neighbours"]], "the other worker's engine learned it"

        # Uninstall: nothing of the repository is left in any table of the service database.
        texts = [i["title"] for i in github.repos[REPO].issues.values()] + [comment_text(github)]
        assert served.deliver(installation_payload("deleted", [REPO], installation=INSTALLATION),
                              "installation").status_code == 202
        counts = served.wait_idle()
        assert counts.get("failed", 0) == 0, counts
        assert rows_naming(served.database_url, [REPO, *texts]) == []

        # The web process's /metrics shows what the workers counted.
        served.wait_until(lambda: sample(served.get("/metrics").text, 'ddl_triage_jobs_total{outcome="done"}') >= 6,
                          timeout=10)  # a worker counts a job just after it records it done
        metrics = served.get("/metrics")
        assert metrics.status_code == 200
        assert sample(metrics.text, "ddl_triage_job_seconds_count") >= 6
        assert sample(metrics.text, "ddl_triage_triage_seconds_count") >= 2
        assert sample(metrics.text, "ddl_triage_ready") == 1.0
        assert served.get("/metrics", token=None).status_code == 401
    print(f"topology test: {time.monotonic() - started:.1f} s, of which {ready - started:.1f} s until two workers "
          "were ready")


def test_served_workers_post_the_comment_only_where_the_policy_lets_them_and_store_every_decision(
        github: FakeGitHub, tmp_path: Path) -> None:
    def triage(number: int, config: str, association: str = "NONE", **text: str) -> dict[str, Any]:
        github.repos[REPO].files[CONFIG_PATH] = config  # read again by every job, in whichever worker
        served.deliver(issue_payload(github, number=number, author_association=association, **text))
        assert served.wait_idle().get("failed", 0) == 0
        return latest_decision(served, number)

    with serving(github, tmp_path, workers=2, worker_niceness="0") as served:
        member = triage(42, "", "MEMBER")  # the NCCL timeout, opened by a member: silent by default
        assert github.bot_comments(REPO, 42) == [] and member["outcome"] == SILENT_MEMBER
        assert member["comment"] is None and not member["posted"] and member["predictions"]["symptom"]["label"]
        asked = triage(43, "comment_on_members: true\n", "MEMBER")
        assert [c["body"] for c in github.bot_comments(REPO, 43)] == [asked["comment"]] and asked["posted"]
        quiet = triage(44, "", **NOTHING_TO_ADD)  # no error, no precedent, nothing to ask
        assert github.bot_comments(REPO, 44) == [] and quiet["outcome"] == SILENT_NOTHING
        never = triage(45, "comment: never\n")
        assert github.bot_comments(REPO, 45) == [] and never["outcome"] == SILENT_NEVER
        always = triage(46, "comment: always\n", **NOTHING_TO_ADD)
        assert len(github.bot_comments(REPO, 46)) == 1 and always["outcome"] == "comment created"

        served.wait_until(lambda: sample(served.get("/metrics").text, 'ddl_triage_jobs_total{outcome="done"}') >= 5,
                          timeout=10)
        metrics = served.get("/metrics").text
    for outcome, count in [("silent_member", 1), ("silent_nothing_to_add", 1), ("silent_never", 1), ("created", 2)]:
        assert sample(metrics, f'ddl_triage_comments_total{{outcome="{outcome}"}}') == count, outcome


def test_thirty_edits_reaching_the_web_process_while_the_workers_are_busy_end_in_one_comment_on_the_latest_text(
        github: FakeGitHub, tmp_path: Path) -> None:
    """Coalescing as deployed: the web process supersedes a queued triage of the same issue at intake, so the
    workers, once free, triage only the newest text."""
    with serving(github, tmp_path, workers=2, worker_niceness="0") as served:
        first, second = served.worker_pids()
        with paused(first, served.databases), paused(second, served.databases):
            assert served.deliver(issue_payload(github)).status_code == 202
            for n in range(1, 30):
                edit = issue_payload(github, "issues-edited",
                                     body=f"Edit {n}: NCCL all_reduce hangs on 2 nodes; a single node works fine.")
                assert served.deliver(edit).status_code == 202
        counts = served.wait_idle()
        decisions = decisions_of(served, 42)
    assert counts == {"done": 1, "superseded": 29}
    assert len(github.bot_comments(REPO, 42)) == 1
    assert [d.action for d in decisions] == ["edited"]
    assert github.repos[REPO].issues[42]["body"].startswith("Edit 29:")


def test_the_shipped_compose_topology_exports_the_worker_containers_metrics_from_the_web(
        github: FakeGitHub, tmp_path: Path) -> None:
    """compose.yaml: `serve --workers 0` and two `ddl-triage worker`s, separate processes (containers) sharing
    only the database and the state volume, where compose.yaml's PROMETHEUS_MULTIPROC_DIR points."""
    compose = yaml.safe_load((Path(__file__).parents[1] / "compose.yaml").read_text(encoding="utf-8"))
    environment = compose["services"]["worker-1"]["environment"]
    assert environment == compose["services"]["web"]["environment"], "one environment for every container"
    where = Path(environment["PROMETHEUS_MULTIPROC_DIR"])
    volume = Path(environment.get("DDL_TRIAGE_STATE_DIR", "/data/state"))  # the Dockerfile's state volume
    shared = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "state" / where.relative_to(volume))}
    with serving(github, tmp_path, workers=0, environment=shared) as served, \
            standalone_workers(served, 2, serve_environment(github, tmp_path) | shared) as pids:
        assert served.deliver(issue_payload(github)).status_code == 202
        served.wait_idle()
        served.wait_until(lambda: sample(served.get("/metrics").text, 'ddl_triage_jobs_total{outcome="done"}') >= 1,
                          timeout=60)
        metrics = served.get("/metrics").text
        assert sample(metrics, "ddl_triage_triage_seconds_count") >= 1, "a worker's histogram, seen by the web"
        files = {path.name for path in Path(shared["PROMETHEUS_MULTIPROC_DIR"]).glob("*.db")}
        assert any(name.endswith(f"-{pid}.db") for name in files for pid in pids), files
    assert len(github.bot_comments(REPO, 42)) == 1


def memory_count(served: Served) -> int:
    store = MemoryStore(served.database_url)
    try:
        return store.count(REPO)
    finally:
        store.close()


def memory_labels(served: Served, number: int) -> list[str]:
    store = MemoryStore(served.database_url)
    try:
        issue = store.issue(REPO, number)
        assert issue is not None
        return issue.labels
    finally:
        store.close()


def decisions_of(served: Served, number: int) -> list[Decision]:
    """The issue's stored decisions, the latest first."""
    store = Store(served.database_url)
    try:
        return [d for d in store.decisions(repo=REPO) if d.number == number]
    finally:
        store.close()


def latest_decision(served: Served, number: int) -> dict[str, Any]:
    return decisions_of(served, number)[0].model_dump()


def issue_event(action: str, number: int, **issue: Any) -> dict[str, Any]:
    payload = copy.deepcopy(load_payload("issues-opened"))
    payload["action"] = action
    payload["issue"].update(number=number, **issue)
    return payload


def command(github: FakeGitHub, body: str) -> dict[str, Any]:
    payload = issue_payload(github, "issue-comment-created")
    payload["comment"]["body"] = body
    return payload


def comment_text(github: FakeGitHub) -> str:
    """The text of the issue a maintainer corrected (the correction keeps it as a labelled case)."""
    return str(github.repos[REPO].issues[42]["body"]).splitlines()[0]


def sample(exposition: str, series: str) -> float:
    """The value of one series in the Prometheus text format (0 when absent)."""
    for line in exposition.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
