"""`.github/ddl-triage.yml`: defaults when missing, an error naming each key and line when invalid (the service
then fails closed), `enabled: false` read leniently, labels mapped."""

from __future__ import annotations

import pytest

from bot.comment import CommentPolicy
from bot.core.domain import AxisPrediction, EnvironmentFacts, TriageResult
from bot.core.settings import AXES, Settings
from bot.deciding.repo_config import (
    CONFIG_PATH,
    RepoConfig,
    RepoConfigError,
    label_names,
    parse_repo_config,
)
from bot.knowledge.taxonomy import Taxonomy
from bot.models.policy import apply_thresholds
from bot.service.github.credentials import AppCredentials
from bot.service.github.github_app import GitHubApp
from bot.service.handlers.config_file import load_repo_config
from tests.fake_github import REPO, FakeGitHub


def _result() -> TriageResult:
    preds = {axis: AxisPrediction(label=None, confidence=0.3, top=[("none", 0.3)]) for axis in AXES}
    preds["kind"] = AxisPrediction(label="bug_report", confidence=0.9, top=[("bug_report", 0.9)])
    preds["symptom"] = AxisPrediction(label="hang_timeout", confidence=0.62, top=[("hang_timeout", 0.62)])
    return TriageResult(issue_id="x", predictions=preds, neighbours=[], environment=EnvironmentFacts(),
                        predictor="default", taxonomy_version="ddl-v1", model_id="m")


def test_a_missing_or_empty_file_gives_the_defaults(taxonomy: Taxonomy) -> None:
    assert parse_repo_config(None, taxonomy) == RepoConfig()
    assert parse_repo_config("", taxonomy) == RepoConfig()
    default = RepoConfig()
    assert default.enabled and default.axes == AXES and not default.labels.enabled and not default.shadow


@pytest.mark.parametrize(("text", "named"), [
    ("enabled: [", "not valid YAML (line 1)"),
    ("- enabled", "mapping"),
    ("enabled: true\ncolour: blue\n", "colour: Extra inputs are not permitted (line 2)"),
    ("axes: [kind, mood]\n", "mood"),
    ("\nthresholds: {symptom: 1.5}\n", "between 0 and 1 (line 2)"),
    ("labels:\n  names:\n    symptom: {hangs: hang}\n", "labels.names: Value error, ['hangs'] are not symptom"),
    ("comment: sometimes\n", "comment: Input should be 'useful', 'always' or 'never' (line 1)"),
    ("comment_on_members: maybe\n", "comment_on_members"),
    ("enabled: true\nshadw: true\n", "shadw: Extra inputs are not permitted (line 2)"),
    ("comment_labels: sometimes\n", "comment_labels"),
])
def test_an_invalid_file_is_an_error_naming_the_key_and_its_line(taxonomy: Taxonomy, text: str, named: str) -> None:
    with pytest.raises(RepoConfigError) as raised:
        parse_repo_config(text, taxonomy, "o/r/.github/ddl-triage.yml")
    assert str(raised.value).startswith("o/r/.github/ddl-triage.yml: ") and named in str(raised.value)


@pytest.mark.parametrize("text", ["enabled: false\nshadw: true\n", "enabled: off\ncomment: sometimes\n",
                                  "axes: [kind\nenabled: false\n", "enabled: false\n"])
def test_enabled_false_wins_over_every_other_key(taxonomy: Taxonomy, text: str) -> None:
    assert parse_repo_config(text, taxonomy) == RepoConfig(enabled=False)


def test_a_valid_file_is_read(taxonomy: Taxonomy) -> None:
    text = ("enabled: true\naxes: [symptom, kind]\nthresholds: {symptom: 0.8}\nshadow: true\n"
            "labels:\n  enabled: true\n  axes: [symptom]\n  names: {symptom: {hang_timeout: hang}}\n")
    config = parse_repo_config(text, taxonomy)
    assert config.axes == ("kind", "symptom") and config.thresholds == {"symptom": 0.8} and config.shadow
    assert config.labels.enabled and config.labels.name("symptom", "hang_timeout") == "hang"


def test_the_comment_policy_is_the_files_choice_over_the_services_floors(taxonomy: Taxonomy) -> None:
    settings = Settings(similarity_floor=0.7, memory_related_floor=0.9)
    assert RepoConfig().comment_policy(settings) == CommentPolicy(similarity_floor=0.7, related_floor=0.9)
    config = parse_repo_config("comment: never\ncomment_on_members: true\naxes: [symptom]\n", taxonomy)
    policy = config.comment_policy(settings)
    assert (policy.comment, policy.comment_on_members, policy.axes) == ("never", True, ("symptom",))
    assert policy.similarity_floor == 0.7 and policy.related_floor == 0.9
    assert not policy.comment_labels  # the labels leave the comment's text unless the repository asks for them
    assert parse_repo_config("comment_labels: true\n", taxonomy).comment_policy(settings).comment_labels


def test_repository_thresholds_decide_which_axes_are_shown() -> None:
    stricter = apply_thresholds(_result(), {"symptom": 0.8})
    assert stricter.predictions["symptom"].label is None and stricter.predictions["kind"].label == "bug_report"
    looser = apply_thresholds(_result(), {"stage": 0.2})
    assert looser.predictions["stage"].label == "none"


def test_label_names_come_from_the_taxonomy_through_the_config_map(taxonomy: Taxonomy) -> None:
    assert label_names(RepoConfig(), _result()) == []
    config = parse_repo_config("labels:\n  enabled: true\n  names: {kind: {bug_report: bug}}\n", taxonomy)
    assert label_names(config, _result()) == ["bug", "symptom:hang_timeout"]


def test_the_config_is_read_as_the_installation_and_an_unreadable_one_is_an_error(
        taxonomy: Taxonomy, github: FakeGitHub) -> None:
    client = GitHubApp(AppCredentials(github.app_id, github.private_key, github.base_url), 0.0).installation(51000001)
    github.repos[REPO].files[CONFIG_PATH] = "enabled: false\n"
    assert load_repo_config(client, REPO, taxonomy) == RepoConfig(enabled=False)
    github.fail("GET", f"/repos/{REPO}/contents/{CONFIG_PATH}", (403, {}, "Resource not accessible by integration"))
    with pytest.raises(RepoConfigError, match=r"cannot be read .*403"):
        load_repo_config(client, REPO, taxonomy)
    del github.repos[REPO].files[CONFIG_PATH]
    assert load_repo_config(client, REPO, taxonomy) == RepoConfig(), "no file: the defaults"
    assert load_repo_config(None, REPO, taxonomy) == RepoConfig(), "no credentials: the defaults"
