"""`ddl-triage action`: the GitHub Action form, run as a workflow step would run it, against the fake GitHub."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.comment import has_marker
from tests.fake_github import REPO, FakeGitHub, github_holding, issue_payload

WORKFLOW_TOKEN = "ghs_workflow_token_of_this_run"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(config="enabled: true\n") as fake:
        fake.tokens[WORKFLOW_TOKEN] = 0  # what GitHub gives the workflow as GITHUB_TOKEN
        yield fake


def run_step(github: FakeGitHub, payload: dict[str, object], event: str, tmp_path: Path
             ) -> subprocess.CompletedProcess[str]:
    event_path = tmp_path / f"event-{payload['action']}.json"
    event_path.write_text(json.dumps(payload), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DDL_TRIAGE_", "GITHUB_"))}
    env |= {"GITHUB_EVENT_PATH": str(event_path), "GITHUB_EVENT_NAME": event, "GITHUB_TOKEN": WORKFLOW_TOKEN,
            "GITHUB_API_URL": github.base_url, "GITHUB_RUN_ID": "77", "DDL_TRIAGE_STATE_DIR": str(tmp_path / "st"),
            "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "bot.cli.main", "action"], capture_output=True, text=True, env=env,
                          timeout=600)


def test_an_opened_issue_gets_one_comment_and_an_edit_updates_it(github: FakeGitHub, tmp_path: Path) -> None:
    opened = issue_payload(github, "issues-opened", number=7)
    first = run_step(github, opened, "issues", tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "comment created"
    comments = github.bot_comments(REPO, 7)
    assert len(comments) == 1 and has_marker(comments[0]["body"])
    assert all(r.authorization.endswith(WORKFLOW_TOKEN) for r in github.requests)

    edited = issue_payload(github, "issues-edited", number=7,
                           body="Update: a single node works fine; on 2 nodes x 8 H100 the run now stops with NCCL "
                                "error: unhandled system error on rank 3. torch 2.3.1, deepspeed 0.14.4.")
    second = run_step(github, edited, "issues", tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() in {"comment edited", "comment unchanged"}
    after = github.bot_comments(REPO, 7)
    assert len(after) == 1 and after[0]["id"] == comments[0]["id"]
    assert "@" not in after[0]["body"].replace("@\u200b", "")
    assert not [r for r in github.writes() if "/labels" in r.path]


def test_the_action_honours_the_comment_policy_of_the_repository(github: FakeGitHub, tmp_path: Path) -> None:
    by_member = issue_payload(github, "issues-opened", number=9, author_association="MEMBER")
    run = run_step(github, by_member, "issues", tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "silent: opened by a member" and github.bot_comments(REPO, 9) == []


def test_a_bot_event_and_a_missing_token_are_handled_in_one_line(github: FakeGitHub, tmp_path: Path) -> None:
    from_bot = issue_payload(github, "issues-opened", number=8)
    from_bot["sender"] = from_bot["sender"] | {"type": "Bot", "login": "renovate[bot]"}  # type: ignore[operator]
    run = run_step(github, from_bot, "issues", tmp_path)
    assert run.returncode == 0 and "ignored" in run.stdout and not github.bot_comments(REPO, 8)
    event_path = tmp_path / "event.json"
    event_path.write_text("{not json", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DDL_TRIAGE_", "GITHUB_"))}
    env |= {"GITHUB_EVENT_PATH": str(event_path), "DDL_TRIAGE_STATE_DIR": str(tmp_path / "st")}
    broken = subprocess.run([sys.executable, "-m", "bot.cli.main", "action"], capture_output=True, text=True, env=env,
                            timeout=600)
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert broken.stderr.count("\n") == 1 and "GITHUB_EVENT_PATH" in broken.stderr


READER = "carol-reader"  # a collaborator whose role is read: GitHub calls her a COLLABORATOR all the same
PERMISSION = f"/repos/{REPO}/collaborators/{READER}/permission"


def triage_command(github: FakeGitHub, number: int, author: str = READER) -> dict[str, object]:
    """`/triage` commented on issue `number` by `author`, a collaborator (the payload's association)."""
    payload = issue_payload(github, "issue-comment-created", number=number)
    payload["comment"] |= {"body": "/triage", "author_association": "COLLABORATOR",
                           "user": payload["comment"]["user"] | {"login": author}}
    payload["sender"] = payload["sender"] | {"login": author}
    return payload


def test_triage_from_a_read_only_collaborator_is_refused_and_the_output_says_why(github: FakeGitHub,
                                                                                 tmp_path: Path) -> None:
    github.repos[REPO].permissions[READER] = "read"
    run = run_step(github, triage_command(github, 11), "issue_comment", tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "command without a triage role"
    assert [r.path for r in github.requests] == [PERMISSION]  # her role was asked for, and nothing else done
    assert github.writes() == [] and github.bot_comments(REPO, 11) == []


@pytest.mark.parametrize("status, message", [(403, "Resource not accessible by integration"),
                                             (500, "Server Error")], ids=["forbidden", "server-error"])
def test_triage_whose_role_cannot_be_read_is_refused_and_the_output_says_why(
        github: FakeGitHub, tmp_path: Path, status: int, message: str) -> None:
    """Without API access to the collaborator's role, the payload's COLLABORATOR (which a read-only collaborator
    has too) is not taken for a role that may triage: the step fails, naming the lookup that failed."""
    github.repos[REPO].permissions[READER] = "read"
    github.fail("GET", PERMISSION, *[(status, {}, message)] * 10)  # every retry of the lookup fails
    run = run_step(github, triage_command(github, 12), "issue_comment", tmp_path)
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert f"role of {READER} on {REPO}" in run.stderr and f"GitHub answered {status} {message}" in run.stderr
    assert {r.path for r in github.requests} == {PERMISSION}
    assert github.writes() == [] and github.bot_comments(REPO, 12) == []


# --- the example workflow (examples/github-action.yml) -----------------------------------------------------------

WORKFLOW = Path(__file__).parent.parent / "examples" / "github-action.yml"
PINNED_ACTION = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")
MAY_TRIAGE = {"admin", "maintain", "write", "triage"}


def workflow() -> dict[str, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def access_script() -> str:
    (step,) = [s for s in workflow()["jobs"]["access"]["steps"] if s.get("id") == "role"]
    return str(step["run"])


def run_access_step(github: FakeGitHub, event: str, commenter: str, tmp_path: Path) -> str:
    """The access job's script as the runner runs it (bash -eo pipefail), against the fake GitHub."""
    return access_step(github, event, commenter, tmp_path)[0]


def access_step(github: FakeGitHub, event: str, commenter: str, tmp_path: Path) -> tuple[str, str]:
    """The access job's output (`allowed=...`) and its log (stdout)."""
    output = tmp_path / f"output-{event}-{commenter}"
    output.unlink(missing_ok=True)
    env = {"PATH": os.environ["PATH"], "GITHUB_API_URL": github.base_url, "GITHUB_REPOSITORY": REPO,
           "GITHUB_OUTPUT": str(output), "GITHUB_TOKEN": WORKFLOW_TOKEN, "EVENT_NAME": event, "COMMENTER": commenter}
    run = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", access_script()],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return output.read_text(encoding="utf-8").strip(), run.stdout


def test_the_access_job_refuses_triage_from_a_reader_and_when_the_role_cannot_be_read_and_says_why(
        github: FakeGitHub, tmp_path: Path) -> None:
    github.repos[REPO].permissions.update({READER: "read", "dave-writer": "write"})
    allowed, log = access_step(github, "issue_comment", READER, tmp_path)
    assert (allowed, log.strip()) == ("allowed=false", f"/triage from {READER} (role: read): allowed=false")
    # Without API access to the role (the token may not read it, GitHub fails): nobody is allowed, not even a
    # writer, and the log says that the lookup failed, not that the role is lacking.
    writer = f"/repos/{REPO}/collaborators/dave-writer/permission"
    for status, tries in ((403, 1), (502, 4)):  # curl --retry 3 tries a 502 again, three times
        github.fail("GET", writer, *[(status, {}, "Resource not accessible by integration")] * tries)
        allowed, log = access_step(github, "issue_comment", "dave-writer", tmp_path)
        assert allowed == "allowed=false", status
        assert f"::warning::/triage from dave-writer is not run: the collaborator-permission lookup failed " \
               f"(HTTP {status})" in log, log
    assert access_step(github, "issue_comment", "dave-writer", tmp_path)[0] == "allowed=true"  # once it answers


def test_only_admin_maintain_write_and_triage_roles_may_run_triage_from_a_comment(github: FakeGitHub,
                                                                                   tmp_path: Path) -> None:
    roles = ["admin", "maintain", "write", "triage", "read"]
    github.repos[REPO].permissions.update({f"user-{role}": role for role in roles})
    for role in roles:
        expected = "true" if role in MAY_TRIAGE else "false"
        assert run_access_step(github, "issue_comment", f"user-{role}", tmp_path) == f"allowed={expected}", role
    assert run_access_step(github, "issue_comment", "a-stranger", tmp_path) == "allowed=false"  # GitHub: 404
    asked = [r.path for r in github.requests]
    assert asked == [f"/repos/{REPO}/collaborators/{who}/permission"
                     for who in [*(f"user-{role}" for role in roles), "a-stranger"]]
    assert all(r.authorization.endswith(WORKFLOW_TOKEN) for r in github.requests)
    assert run_access_step(github, "issues", "", tmp_path) == "allowed=true"
    assert len(github.requests) == len(asked)  # an issue event asks GitHub nothing


def test_the_workflow_decides_access_before_it_installs_anything() -> None:
    jobs = workflow()["jobs"]
    access, triage = jobs["access"], jobs["triage"]
    assert set(jobs) == {"access", "triage"}
    assert all("uses" not in step for step in access["steps"])  # a bare runner: no setup-python, no cache
    assert not [step for step in access["steps"] if re.search(r"\bpip\b", step.get("run", ""))]
    assert triage["needs"] == "access"
    assert triage["if"].replace(" ", "") == "${{needs.access.outputs.allowed=='true'}}"
    assert access["outputs"]["allowed"] == "${{ steps.role.outputs.allowed }}"
    assert access["permissions"] == {"contents": "read"} and workflow()["permissions"] == {}


def test_the_workflow_pins_the_release_its_dependencies_and_every_action() -> None:
    flow = workflow()
    version = tomllib.loads((WORKFLOW.parent.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "version"]
    ref = flow["env"]["DDL_TRIAGE_REF"]
    assert ref == f"v{version}" or re.fullmatch(r"[0-9a-f]{40}", ref), ref
    steps = [step for job in flow["jobs"].values() for step in job["steps"]]
    assert all(PINNED_ACTION.match(step["uses"]) for step in steps if "uses" in step)
    (install,) = [step for step in steps if "pip install" in step.get("run", "")]
    command = install["run"]
    assert "git+https://github.com/OWNER/ddl-triage@$DDL_TRIAGE_REF" in command
    assert "-c \"https://raw.githubusercontent.com/OWNER/ddl-triage/$DDL_TRIAGE_REF/constraints.txt\"" in command
    assert not re.search(r"@(main|master|HEAD)\b", WORKFLOW.read_text(encoding="utf-8"))
