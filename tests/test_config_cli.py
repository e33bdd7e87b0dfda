"""`ddl-triage config check` and `ddl-triage labels list|create`, as a maintainer runs them before committing
`.github/ddl-triage.yml`; `labels create` against the fake GitHub (a real HTTP server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.deciding.config_check import check_config, line_of, wanted_labels
from bot.deciding.repo_config import RepoConfig, RepoConfigError, parse_repo_config
from bot.knowledge.taxonomy import Taxonomy
from tests.fake_github import REPO, github_holding

TOKEN = "ghp_labels_test_token"

GOOD = """\
comment: useful
thresholds: {symptom: 0.7}
labels:
  enabled: true
  names:
    kind: {bug_report: bug}
    symptom: {out_of_memory: oom}
"""

BROKEN = """\
enabled: true
thresholds:
  symptom: high
shadow: false
colour: blue
labels:
  enabled: true
  names:
    symptom: {out_of_memry: oom}
"""


def cli(*args: str, tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DDL_TRIAGE_")}
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True, text=True, timeout=300,
                          env=base | {"DDL_TRIAGE_STATE_DIR": str(tmp_path / "state"), **(env or {})})


def test_config_check_accepts_a_good_file_and_says_what_it_sets(tmp_path: Path) -> None:
    path = tmp_path / "ddl-triage.yml"
    path.write_text(GOOD)
    done = cli("config", "check", str(path), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{path}: ok")
    assert "thresholds: {'symptom': 0.7}" in done.stdout and "labels list --config" in done.stdout


def test_config_check_names_the_line_and_key_of_every_error_and_exits_1(tmp_path: Path, taxonomy: Taxonomy) -> None:
    path = tmp_path / "ddl-triage.yml"
    path.write_text(BROKEN)
    done = cli("config", "check", str(path), tmp_path=tmp_path)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("ddl-triage: error:")]
    assert errors[0].startswith(f"ddl-triage: error: {path}:3: thresholds.symptom: Input should be a valid number")
    assert any(f"{path}:5: colour: Extra inputs are not permitted" in e for e in errors), errors
    assert any(f"{path}:8: labels.names:" in e and "out_of_memry" in e for e in errors), errors
    assert "would do nothing in the repository" in done.stderr and "Traceback" not in done.stderr
    # What the check refuses is what the service refuses (it fails closed on the same file).
    with pytest.raises(RepoConfigError):
        parse_repo_config(BROKEN, taxonomy)


def test_config_check_reports_bad_yaml_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "ddl-triage.yml"
    path.write_text("comment: useful\nlabels:\n  enabled: [true\n")
    done = cli("config", "check", str(path), tmp_path=tmp_path)
    assert done.returncode == 1 and f"{path}:4: not valid YAML" in done.stderr, done.stderr
    missing = cli("config", "check", str(tmp_path / "nothing.yml"), tmp_path=tmp_path)
    assert missing.returncode == 1 and "nothing.yml: no such file" in missing.stderr


def test_line_of_finds_nested_keys_and_list_items(taxonomy: Taxonomy) -> None:
    import yaml

    root = yaml.compose("axes: [kind, bogus]\nlabels:\n  axes:\n    - kind\n    - nope\n")
    assert line_of(root, ("labels", "axes", 1)) == 5
    assert line_of(root, ("axes",)) == 1
    assert line_of(root, ("labels", "missing")) == 2  # the deepest key the file holds
    config, problems = check_config("labels:\n  axes:\n    - kind\n    - nope\n", taxonomy)
    assert config is None and [(p.line, p.key) for p in problems] == [(2, "labels.axes")]


def test_labels_list_prints_every_name_the_mapping_can_add(tmp_path: Path, taxonomy: Taxonomy) -> None:
    path = tmp_path / "ddl-triage.yml"
    path.write_text(GOOD)
    done = cli("labels", "list", "--config", str(path), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    names = [line.split("\t")[0] for line in done.stdout.splitlines()]
    expected = len(taxonomy.predictable("kind")) + len(taxonomy.predictable("symptom"))
    assert len(names) == expected and "bug" in names and "oom" in names and "symptom:hang_timeout" in names
    assert "kind:bug_report" not in names and "symptom:out_of_memory" not in names
    defaults = cli("labels", "list", tmp_path=tmp_path)
    assert "kind:bug_report\tkind=bug_report" in defaults.stdout


def test_labels_create_makes_the_missing_labels_once_and_leaves_existing_ones(tmp_path: Path,
                                                                             taxonomy: Taxonomy) -> None:
    path = tmp_path / "ddl-triage.yml"
    path.write_text(GOOD)
    wanted = [label.name for label in wanted_labels(RepoConfig.model_validate(
        {"labels": {"enabled": True, "names": {"kind": {"bug_report": "bug"}, "symptom": {"out_of_memory": "oom"}}}},
        context={"taxonomy": taxonomy}), taxonomy)]
    with github_holding(labels=["Bug", "question"]) as github:
        github.tokens[TOKEN] = 0
        env = {"DDL_TRIAGE_GITHUB_TOKEN": TOKEN, "DDL_TRIAGE_GITHUB_API_URL": github.base_url}
        dry = cli("labels", "create", "--repo", REPO, "--config", str(path), "--dry-run", tmp_path=tmp_path, env=env)
        assert dry.returncode == 0, dry.stderr
        assert github.repos[REPO].labels == ["Bug", "question"]  # a dry run creates nothing
        done = cli("labels", "create", "--repo", REPO, "--config", str(path), tmp_path=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        labels = github.repos[REPO].labels
        assert labels[:2] == ["Bug", "question"] and sorted(labels[2:]) == sorted(set(wanted) - {"bug"})
        assert f"{REPO}: {len(wanted) - 1} label(s) created, 1 already there" in done.stderr
        details = github.repos[REPO].label_details["oom"]
        assert details["color"] == "d93f0b" and details["description"].startswith("ddl-triage symptom:")
        assert len(details["description"]) <= 100
        again = cli("labels", "create", "--repo", REPO, "--config", str(path), tmp_path=tmp_path, env=env)
        assert again.returncode == 0 and f"0 label(s) created, {len(wanted)} already there" in again.stderr
        assert len(github.repos[REPO].labels) == len(labels)


@pytest.mark.parametrize("env", [{}, {"DDL_TRIAGE_GITHUB_TOKEN": "ghp_not_known_here"}])
def test_labels_create_without_access_says_what_to_set_or_what_github_answered(tmp_path: Path,
                                                                              env: dict[str, str]) -> None:
    with github_holding() as github:
        done = cli("labels", "create", "--repo", REPO, tmp_path=tmp_path,
                   env={"DDL_TRIAGE_GITHUB_API_URL": github.base_url, **env})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert ("DDL_TRIAGE_GITHUB_TOKEN" in done.stderr) if not env else ("401" in done.stderr or "redential" in
                                                                         done.stderr), done.stderr
