"""The repository's own labelled memory in the taxonomy axes: a `/triage` correction, or a maintainer's label
mapped by `labels.names`, flips the prediction of a near-identical issue of the same repository at once, and
changes nothing in another installation's repository (no refit: the same engine serves both)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from bot.core.settings import Settings
from bot.models.engine import Engine
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
from tests.memory_helpers import installation_payload

OTHER = "other-org/elsewhere"
CONFIG = "labels:\n  names:\n    symptom:\n      out_of_memory: oom\n"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with github_holding(permissions={"bob-maintainer": "write"}, labels=["oom"], config=CONFIG) as fake:
        fake.add_repo(OTHER, labels=["oom"])
        yield fake


def opened_in(github: FakeGitHub, repo: str, number: int, suffix: str = "") -> dict[str, Any]:
    payload = copy.deepcopy(load_payload("issues-opened"))
    payload["repository"]["full_name"] = repo
    payload["installation"]["id"] = 1 if repo == REPO else 2
    payload["issue"].update(number=number, html_url=f"https://github.com/{repo}/issues/{number}",
                            body=payload["issue"]["body"] + suffix)
    github.add_issue(payload)
    return payload


def symptom(client: Any, repo: str, number: int) -> str | None:
    decision = next(d for d in state_of(client).store.decisions(repo=repo) if d.number == number)
    label = decision.predictions["symptom"]["label"]
    return str(label) if label is not None else None


def test_a_correction_flips_a_near_identical_issue_of_its_repository_and_nothing_elsewhere(
        app_settings: Settings, private_engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, private_engine) as client:
        deliver(client, issue_payload(github))
        deliver(client, opened_in(github, OTHER, 43, "\nSeen again today."))
        wait_idle(client)
        before_elsewhere = symptom(client, OTHER, 43)
        assert symptom(client, REPO, 42) != "out_of_memory", "the correction must change something"

        comment = issue_payload(github, "issue-comment-created")
        comment["comment"]["body"] = "/triage symptom=out_of_memory"
        deliver(client, comment, event="issue_comment")
        wait_idle(client)

        deliver(client, opened_in(github, REPO, 43, "\nSeen again today."))
        deliver(client, opened_in(github, OTHER, 44, "\nSeen again today."))
        wait_idle(client)
        assert symptom(client, REPO, 43) == "out_of_memory"
        assert symptom(client, OTHER, 44) == before_elsewhere


def test_a_maintainers_label_mapped_in_the_config_joins_the_repositorys_case_base_at_once(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    for repo in (REPO, OTHER):  # both repositories hold a near-copy labelled "oom"; only REPO maps it
        twin = dict(load_payload("issues-opened")["issue"], number=7, state="open", labels=[{"name": "oom"}],
                    created_at="2024-04-01T00:00:00Z", updated_at="2024-04-01T00:00:00Z")
        github.put_issue(repo, twin)
    settings = app_settings.model_copy(update={"memory_page_interval_s": 0.0})
    with running_service(settings, engine) as client:
        deliver(client, installation_payload("created", [REPO, OTHER]), "installation")
        wait_idle(client)
        deliver(client, issue_payload(github))
        deliver(client, opened_in(github, OTHER, 42))
        wait_idle(client)
        assert symptom(client, REPO, 42) == "out_of_memory"
        assert symptom(client, OTHER, 42) != "out_of_memory"
