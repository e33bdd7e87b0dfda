"""Benchmark definitions: every shipped one loads; a bad one names its file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.errors import ConfigError
from eval.task import RunConfig, load_task, load_task_file, task_config, task_files


def test_every_shipped_definition_loads_and_resolves(gold_dir: Path) -> None:
    assert {p.stem for p in task_files()} >= {"ddl-dev-cv", "liu23-to-ddl-dev"}
    for path in task_files():
        config = task_config(load_task_file(path), gold_dir, llm_configured=False)
        assert all(p.is_file() for p in (*config.datasets, *config.train_on, *(config.extra_cases or ())))
        assert "llm" not in config.predictors


def test_the_readme_benchmark_adds_liu23_to_every_case_base(gold_dir: Path) -> None:
    config = task_config(load_task("ddl-dev-cv"), gold_dir, llm_configured=True)
    assert config.mode == "cv" and config.folds == 5 and config.seed == 0 and config.repeats == 5
    assert config.pool and config.evaluated_sets == [(gold_dir / "ddl-dev.jsonl", gold_dir / "ddl-dev-r3.jsonl",
                                                      gold_dir / "ddl-dev-r4.jsonl")]
    assert config.extra_cases_for_all(config.datasets)[0] == (gold_dir / "liu23.jsonl",)
    assert config.extra_cases_for(gold_dir / "ddl-dev.jsonl")[0] == (gold_dir / "liu23.jsonl",)
    assert config.predictors[-1] == "llm"


def test_ddl_dev_gets_liu23_as_extra_cases_by_default_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "ddl-dev.jsonl").write_text("")
    (tmp_path / "liu23.jsonl").write_text("")
    config = RunConfig(datasets=(tmp_path / "ddl-dev.jsonl",))
    files, rule = config.extra_cases_for(tmp_path / "ddl-dev.jsonl")
    assert files == (tmp_path / "liu23.jsonl",)
    assert "default for ddl-dev.jsonl" in rule
    assert config.model_copy(update={"extra_cases": ()}).extra_cases_for(tmp_path / "ddl-dev.jsonl") == ((), "given")
    transfer = RunConfig(datasets=(tmp_path / "ddl-dev.jsonl",), train_on=(tmp_path / "liu23.jsonl",))
    assert transfer.mode == "transfer" and transfer.extra_cases_for(tmp_path / "ddl-dev.jsonl")[0] == ()


def test_an_unknown_key_is_rejected_with_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nversion: 1\ndatasets: [ddl-dev.jsonl]\nfold: 3\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml: invalid benchmark definition: fold: Extra inputs"):
        load_task_file(path)


def test_an_unknown_predictor_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nversion: 1\ndatasets: [ddl-dev.jsonl]\npredictors: [oracle]\n")
    with pytest.raises(ConfigError, match=r"predictors: .*unknown predictors"):
        load_task_file(path)


def test_an_unknown_definition_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"known: .*ddl-dev-cv"):
        load_task("no-such-benchmark")
