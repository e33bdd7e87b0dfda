"""The service speaks only when its comment adds something, and never over a member's shoulder unless asked:
`comment:` and `comment_on_members:` of `.github/ddl-triage.yml`, the issue author's `author_association`. A
silent triage still stores its decision and still adds the labels the config enables."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from bot.comment.policy import SILENT_MEMBER, SILENT_NEVER, SILENT_NOTHING
from bot.core.settings import Settings
from bot.deciding.repo_config import CONFIG_PATH
from bot.models.engine import Engine
from bot.service.decisions.models import Decision
from bot.service.github.payloads import github_time, parse_event
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
from tests.fake_llm import FakeChatServer

# A request with no error, no precedent and nothing to ask: `ddl-triage predict --with-comment` leaves it
# silent (comment null) on the gold case base and on the case pack alike; its kind is feature_request (0.97).
NOTHING_TO_ADD = {"title": "Support bf16 optimizer states when offloading",
                  "body": "It would be nice to keep optimizer states in bf16 when they are offloaded to CPU. "
                          "Is this planned?"}
TIMEOUT_TITLE = load_payload("issues-opened")["issue"]["title"]  # the NCCL timeout the service comments on
LABELS = "labels:\n  enabled: true\n  axes: [kind]\n  names: {kind: {feature_request: enhancement}}\n"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(labels=["enhancement", "bug"], permissions={"bob-maintainer": "write"}) as fake:
        yield fake


def configure(github: FakeGitHub, text: str) -> None:
    """The repository's `.github/ddl-triage.yml` from now on (read again by every job)."""
    github.repos[REPO].files[CONFIG_PATH] = text


def opened(github: FakeGitHub, number: int, association: str = "NONE", **text: str) -> dict[str, Any]:
    """`issues.opened` for issue `number` (the NCCL timeout of the payload unless `text` says otherwise)."""
    return issue_payload(github, number=number, author_association=association, **text)


def decision_of(client: Any, number: int) -> Decision:
    return next(d for d in state_of(client).store.decisions(repo=REPO) if d.number == number)


def test_the_issue_authors_association_is_read_from_the_payload() -> None:
    payload = load_payload("issues-opened")
    assert parse_event("issues", payload).author_association == "NONE"
    payload["issue"]["author_association"] = "member"
    assert parse_event("issues", payload).author_association == "MEMBER"
    del payload["issue"]["author_association"]
    assert parse_event("issues", payload).author_association is None


def test_the_issues_opening_time_is_read_from_the_payload_and_a_bad_one_costs_only_the_date() -> None:
    payload = load_payload("issues-opened")
    payload["issue"]["created_at"] = "2024-05-01T12:00:00Z"
    assert parse_event("issues", payload).issue.created_at == datetime(2024, 5, 1, 12, tzinfo=UTC)
    for bad in ("yesterday", 17, None):
        payload["issue"]["created_at"] = bad
        assert parse_event("issues", payload).issue.created_at is None
    assert github_time("2024-05-01T14:00:00+02:00") == datetime(2024, 5, 1, 12, tzinfo=UTC)


def test_a_members_issue_gets_no_comment_by_default_but_a_decision_and_one_with_comment_on_members(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        deliver(client, opened(github, 42, "MEMBER"))
        assert wait_idle(client) == {"done": 1}
        assert github.bot_comments(REPO, 42) == []
        silent = decision_of(client, 42)
        assert silent.outcome == SILENT_MEMBER and silent.comment is None and not silent.posted
        assert silent.predictions["symptom"]["label"] == "hang_timeout", "the decision is stored in full"

        configure(github, "comment_on_members: true\n")
        deliver(client, opened(github, 43, "MEMBER"))
        wait_idle(client)
        [comment] = github.bot_comments(REPO, 43)
        assert decision_of(client, 43).comment == comment["body"] and decision_of(client, 43).posted
        # Why it spoke is stored with the decision: first, the watchdog timeout's next step.
        assert decision_of(client, 43).reasons[0] == "next_step"
        assert "**Likely:**" not in comment["body"], "labels are for routing unless comment_labels: true"
        metrics = client.get("/metrics").text
    assert 'ddl_triage_comments_total{outcome="silent_member"} 1.0' in metrics
    assert 'ddl_triage_comments_total{outcome="created"} 1.0' in metrics


def test_a_triage_command_answers_a_members_issue(app_settings: Settings, engine: Engine,
                                                  github: FakeGitHub) -> None:
    command = issue_payload(github, "issue-comment-created", author_association="OWNER")
    command["comment"]["body"] = "/triage"
    with running_service(app_settings, engine) as client:
        deliver(client, command, "issue_comment")
        wait_idle(client)
    assert len(github.bot_comments(REPO, 42)) == 1, "someone with write access asked for it"


def test_an_issue_with_nothing_to_add_gets_no_comment_but_a_decision_and_its_labels(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    configure(github, LABELS)
    with running_service(app_settings, engine) as client:
        deliver(client, opened(github, 44, **NOTHING_TO_ADD))
        assert wait_idle(client) == {"done": 1}
        decision = decision_of(client, 44)
    assert github.bot_comments(REPO, 44) == []
    assert decision.outcome == SILENT_NOTHING and decision.comment is None and not decision.posted
    assert decision.reasons == []
    assert decision.labels_added == ["enhancement"], "labels do not depend on the comment"
    assert [label["name"] for label in github.repos[REPO].issues[44]["labels"]] == ["enhancement"]


def test_comment_never_posts_nothing_and_always_posts_even_with_nothing_to_add(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        configure(github, "comment: never\n")
        deliver(client, opened(github, 42))  # the NCCL timeout: a diagnosis, so a comment by default
        wait_idle(client)
        assert github.bot_comments(REPO, 42) == [] and decision_of(client, 42).outcome == SILENT_NEVER

        configure(github, "comment: always\n")
        deliver(client, opened(github, 44, **NOTHING_TO_ADD))
        wait_idle(client)
        [comment] = github.bot_comments(REPO, 44)
        assert decision_of(client, 44).outcome == "comment created" and decision_of(client, 44).posted
    assert "**Seen before:**" not in comment["body"] and "**Next step:**" not in comment["body"], "nothing to add"


def test_a_comment_posted_before_the_bot_fell_silent_is_left_as_it_is(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        payload = opened(github, 42)
        deliver(client, payload)
        wait_idle(client)
        [before] = github.bot_comments(REPO, 42)
        configure(github, "comment: never\n")
        deliver(client, payload | {"action": "edited"})
        assert wait_idle(client) == {"done": 2}
    assert github.bot_comments(REPO, 42) == [before]
    assert [r.method for r in github.writes()] == ["POST"], "one comment created, nothing edited or deleted"


def test_an_invalid_comment_setting_fails_closed_naming_the_key(app_settings: Settings, engine: Engine,
                                                               github: FakeGitHub,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    configure(github, "comment: sometimes\n")
    with running_service(app_settings, engine) as client:
        deliver(client, opened(github, 42))
        wait_idle(client)
    assert github.bot_comments(REPO, 42) == []  # nothing is done in a repository whose config does not validate
    assert "comment: Input should be" in caplog.text and "nothing is done in" in caplog.text


def test_a_configured_llm_writes_the_reading_of_the_posted_comment(app_settings: Settings, engine: Engine,
                                                                   github: FakeGitHub) -> None:
    reading = "Every rank waited on one all-reduce that never finished, so the NCCL watchdog ended the job."
    with FakeChatServer().running() as chat:
        chat.answers.append(reading)
        settings = app_settings.model_copy(update={"llm": "openai:reader", "llm_base_url": chat.base_url,
                                                   "llm_api_key": SecretStr("k"), "llm_timeout_s": 10.0})
        with running_service(settings, engine) as client:
            deliver(client, opened(github, 42))  # the NCCL timeout: a diagnosis, so a next step to read
            wait_idle(client)
        [comment] = github.bot_comments(REPO, 42)
        assert f"**Next step:** {reading}" in comment["body"] and len(chat.requests) == 1


def test_a_triage_reads_the_issue_once_and_the_memory_its_delivery_once(
        app_settings: Settings, engine: Engine, github: FakeGitHub,
        count_readings: Callable[[str], Counter[str]]) -> None:
    """`normalise` is counted wherever bot/ calls it: the triage (engine, recall, the comment's asks) reads the
    issue as the API shows it once, and the memory reads the delivery's copy once (record and vector)."""
    calls = count_readings(TIMEOUT_TITLE)
    with running_service(app_settings, engine) as client:
        deliver(client, opened(github, 42))
        assert wait_idle(client) == {"done": 1}
    assert github.bot_comments(REPO, 42), "the comment was composed (its asks read the report)"
    assert calls == {"bot.models.engine": 1, "bot.memory.records": 1}
