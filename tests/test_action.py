"""`ddl-triage action`: the GitHub Action form, run as a workflow step would run it, against the fake GitHub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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
    return subprocess.run([sys.executable, "-m", "bot.cli", "action"], capture_output=True, text=True, env=env,
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
                           body="Update: the same run now fails with NCCL error: unhandled system error on rank 3, "
                                "and the watchdog timeout follows. torch 2.3.1, deepspeed 0.14.4, 2 nodes x 8 H100.")
    second = run_step(github, edited, "issues", tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() in {"comment edited", "comment unchanged"}
    after = github.bot_comments(REPO, 7)
    assert len(after) == 1 and after[0]["id"] == comments[0]["id"]
    assert "@" not in after[0]["body"].replace("@\u200b", "")
    assert not [r for r in github.writes() if "/labels" in r.path]


def test_a_bot_event_and_a_missing_token_are_handled_in_one_line(github: FakeGitHub, tmp_path: Path) -> None:
    from_bot = issue_payload(github, "issues-opened", number=8)
    from_bot["sender"] = from_bot["sender"] | {"type": "Bot", "login": "renovate[bot]"}  # type: ignore[operator]
    run = run_step(github, from_bot, "issues", tmp_path)
    assert run.returncode == 0 and "ignored" in run.stdout and not github.bot_comments(REPO, 8)
    event_path = tmp_path / "event.json"
    event_path.write_text("{not json", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DDL_TRIAGE_", "GITHUB_"))}
    env |= {"GITHUB_EVENT_PATH": str(event_path), "DDL_TRIAGE_STATE_DIR": str(tmp_path / "st")}
    broken = subprocess.run([sys.executable, "-m", "bot.cli", "action"], capture_output=True, text=True, env=env,
                            timeout=600)
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert broken.stderr.count("\n") == 1 and "GITHUB_EVENT_PATH" in broken.stderr
