"""Missed deliveries: failed, never-recorded ones are redelivered through GitHub's API, once each."""

from __future__ import annotations

from typing import Any

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.queue.recovery import recover_missed
from tests.fake_github import (
    REPO,
    FakeGitHub,
    deliver,
    issue_payload,
    running_service,
    state_of,
    wait_idle,
)


def test_failed_unrecorded_deliveries_are_redelivered_once_and_end_in_one_comment(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    recorded, missed, old = (issue_payload(github, number=n) for n in (42, 43, 44))
    redelivered: list[str] = []
    with running_service(app_settings, engine) as client:
        def send_again(item: dict[str, Any]) -> None:  # GitHub sends the same GUID again
            redelivered.append(item["guid"])
            assert deliver(client, item["_payload"], delivery_id=item["guid"]).status_code == 202

        assert deliver(client, recorded, delivery_id="ok-guid").status_code == 202
        assert wait_idle(client) == {"done": 1}
        github.add_hook_delivery("ok-guid", 202, recorded)
        github.add_hook_delivery("failed-but-stored", 503, recorded)  # e.g. a 503 whose insert landed
        state_of(client).store.record_delivery("failed-but-stored", "issues", "opened", "{}", f"{REPO}#42")
        github.add_hook_delivery("missed-guid", 503, missed)
        github.add_hook_delivery("missed-guid", 502, missed)  # two failed attempts of one delivery
        github.add_hook_delivery("too-old", 503, old, age_s=7 * 3600)
        github.redeliver = send_again
        state = state_of(client)
        assert state.github is not None
        assert recover_missed(state.github, state.store) == 1
        assert recover_missed(state.github, state.store) == 0, "asked once only"
        assert wait_idle(client)["done"] >= 2
    assert redelivered == ["missed-guid"]
    assert len(github.bot_comments(REPO, 43)) == 1 and len(github.bot_comments(REPO, 42)) == 1
    assert github.bot_comments(REPO, 44) == [], "outside the window"
