"""Reactions on the bot's comment as Useful / Not useful: +1 / -1 from someone whose role may triage, read by
the worker (GitHub sends no webhook for reactions) for comments younger than 14 days, within a budget an hour."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.review import records
from bot.service.review.reactions import read_reactions
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    github_holding,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
)

ALICE, BOB = "alice-maintainer", "bob-reader"
HOUR_S = 3600.0


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(permissions={ALICE: "maintain", BOB: "read"}) as fake:
        yield fake


def test_a_thumb_from_a_maintainer_counts_and_one_from_a_reader_does_not(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github))
        wait_idle(client, timeout=300)
        (comment,) = github.bot_comments(REPO, 42)
        github.react(comment["id"], ALICE, "+1")
        github.react(comment["id"], BOB, "-1")
        github.react(comment["id"], ALICE, "heart")
        state = state_of(client)
        now = time.time()
        assert read_reactions(state, now=now) == 1
        (decision,) = state.store.decisions(10, REPO)
        rating = records.ratings(state.store, REPO)[decision.delivery_id]
        assert (rating.useful, rating.not_useful) == (1, 0)
        # Taken back: gone at the next read, which comes only an hour later.
        github.comments[comment["id"]]["_reactions"] = []
        assert read_reactions(state, now=now + 60) == 0
        assert records.ratings(state.store, REPO)[decision.delivery_id].useful == 1
        assert read_reactions(state, now=now + HOUR_S + 1) == 1
        assert records.ratings(state.store, REPO) == {}
        reads = [r for r in github.requests if r.path.endswith("/reactions")]
        assert len(reads) == 2


def test_reads_stay_within_the_budget_of_the_hour_and_skip_comments_older_than_14_days(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings.model_copy(update={"reactions_per_hour": 1}), engine) as client:
        deliver(client, issue_payload(github, number=42))
        deliver(client, issue_payload(github, number=43))
        wait_idle(client, timeout=300)
        assert len(github.bot_comments(REPO, 42)) == len(github.bot_comments(REPO, 43)) == 1
        state = state_of(client)
        now = time.time()
        assert read_reactions(state, now=now) == 1
        assert read_reactions(state, now=now + 10) == 0  # the hour's one read is spent
        assert read_reactions(state, now=now + HOUR_S + 1) == 1  # the comment not read yet comes first
        read = {r.path for r in github.requests if r.path.endswith("/reactions")}
        assert len(read) == 2
        assert read_reactions(state, now=now + 15 * 86400) == 0  # both comments are older than 14 days then


def test_a_decision_row_that_does_not_parse_is_left_out_and_the_others_are_still_read(
        app_settings: Settings, engine: Engine, github: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    with running_service(app_settings, engine) as client:
        deliver(client, issue_payload(github, number=42))
        deliver(client, issue_payload(github, number=43))
        wait_idle(client, timeout=300)
        state = state_of(client)
        broken, kept = state.store.decisions(10, REPO)
        with state.store.transaction() as run:
            run("UPDATE decisions SET decision = '{}' WHERE delivery_id = ?", (broken.delivery_id,))
        (comment,) = github.bot_comments(REPO, kept.number)
        github.react(comment["id"], ALICE, "+1")
        assert read_reactions(state) == 1
        assert records.ratings(state.store, REPO)[kept.delivery_id].useful == 1
        assert f"cannot be read and are left out (delivery {broken.delivery_id}" in caplog.text
        assert [d.delivery_id for d in state.store.decisions(10, REPO)] == [kept.delivery_id]
        assert [d.delivery_id for d in records.latest_decisions(state.store, REPO, 10)] == [kept.delivery_id]
        assert records.decision(state.store, broken.delivery_id) is None  # a post approved on it: "gone"
