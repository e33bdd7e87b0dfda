"""`python -m eval` end to end: a hand-made dataset through the real engine; validate on good and bad data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.core.paths import CHECKOUT_DIR
from tests.fake_llm import FakeChatServer

# Made-up issue texts (never the gold data's): three problems, eight reports each.
PROBLEMS = {
    ("environment_setup", "installation_build_failure", "version_dependency_management"): [
        "pip install fails while building the fused adam op: nvcc error {n}",
        "ninja build of the cpu_adam extension stops, gcc {n} is not supported",
        "setup.py install breaks: CUDA_HOME is not set, compilation failed at step {n}"],
    ("communication_setup", "hang_timeout", "communication_tuning"): [
        "training hangs in init_process_group on node {n}, NCCL never returns",
        "rendezvous timed out after {n} seconds with two nodes",
        "launcher stuck waiting for ranks with a hostfile of {n} hosts"],
    ("training", "out_of_memory", "distributed_feature_tuning"): [
        "CUDA out of memory at step {n} with ZeRO stage 3 on 8 GPUs",
        "OOM when the micro batch size is {n}: tried to allocate 2 GiB",
        "torch.cuda.OutOfMemoryError in backward at iteration {n}"],
}


def made_up_records() -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    for (stage, symptom, fix), texts in PROBLEMS.items():
        for k in range(8):
            text = texts[k % 3].format(n=k * 7 + 3)
            records.append({
                "id": f"made/up#{len(records) + 1}", "url": None, "title": text.split(":")[0],
                "body": f"reporter{k} · description · 2024-0{1 + k % 9}-1{k % 10}\n{text}\nwhat I ran, variant {k}",
                "labels": {"kind": "bug_report", "stage": stage, "symptom": symptom,
                           "root_cause": "dependency_version_mismatch" if k % 2 else "unknown",
                           "fix_pattern": fix if k % 3 else "unresolved"}})
    return records


def run_eval(*args: str, state: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DDL_TRIAGE_STATE_DIR": str(state), "HF_HUB_OFFLINE": "1", **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "eval", *args], cwd=CHECKOUT_DIR, env=env, capture_output=True,
                          text=True, timeout=600)


def metrics_of(out: Path) -> dict[str, object]:
    results = json.loads((out / "results.json").read_text())
    evaluation = results["evaluations"][0]
    return {"axes": {name: p["axes"] for name, p in evaluation["predictors"].items()},
            "paired": evaluation["paired"], "slices": evaluation["slices"]}


@pytest.fixture(scope="module")
def made_up_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "made-up.jsonl"
    lines = [json.dumps(r) for r in made_up_records()]
    path.write_text("\n".join(lines) + "\n{this line is not JSON\n")
    return path


def test_run_writes_results_report_and_plots_and_reruns_to_the_same_numbers(made_up_dataset: Path,
                                                                             tmp_path: Path) -> None:
    common = ["run", "--dataset", str(made_up_dataset), "--folds", "2", "--repeats", "2", "--predictors",
              "majority,knn,linear"]
    first = run_eval(*common, "--out", str(tmp_path / "a"), "--jobs", "2", state=tmp_path / "state")
    assert first.returncode == 0, first.stderr
    assert "made-up.jsonl:25: not JSON" in first.stderr and "skipped 1 bad lines" in first.stderr
    assert "root_cause 12 (unknown 12)" in first.stderr
    assert "as opened: 0 records without an opening post train but are not scored" in first.stderr
    out = tmp_path / "a"
    results = json.loads((out / "results.json").read_text())
    evaluation = results["evaluations"][0]
    assert results["provenance"]["data_files"][str(made_up_dataset)]["sha256"]
    assert results["provenance"]["taxonomy"]["version"] == "ddl-v1"
    assert results["config"]["folds"] == 2 and results["seeds"]["bootstrap"] == 0
    assert evaluation["data"]["test"]["skipped_lines"] == 1
    knn = evaluation["predictors"]["knn"]
    assert len(knn["samples"]) == 48 and len(knn["samples"][0]["input_sha256"]) == 64  # 24 records x 2 repeats
    assert {s["repeat"] for s in knn["samples"]} == {0, 1}
    assert len(knn["axes"]["symptom"]["per_repeat"]["accuracy"]) == 2
    assert set(evaluation["paired"]["comparisons"]) == {"majority", "knn"}  # each against linear
    assert evaluation["paired"]["comparisons"]["majority"]["symptom"]["accuracy_diff"] < 0
    assert knn["axes"]["root_cause"]["skipped"] == {"unknown": 12}
    low, high = knn["axes"]["symptom"]["macro_f1_ci"]
    assert low <= knn["axes"]["symptom"]["macro_f1"] <= high
    report = (out / "report.md").read_text()
    assert "| knn |" in report and "made-up-coverage.png" in report
    assert {"made-up-coverage.png", "made-up-confusion-symptom.png", "made-up-f1-symptom.png",
            "made-up-reliability.png"} <= {p.name for p in out.iterdir()}
    assert "Paired comparison with `linear`" in report and "mean ± sd over 2 repetition(s)" in report
    assert "LLM-assisted" in report and "Licence" in report
    assert (out / "tables" / "made-up-paired.csv").read_text().startswith("predictor,")
    assert "\\begin{tabular}" in (out / "tables" / "made-up-repeated.tex").read_text()

    again = run_eval(*common, "--out", str(tmp_path / "b"), "--jobs", "1", "--no-fit-cache", "--quiet",
                     state=tmp_path / "state")
    assert again.returncode == 0, again.stderr
    assert metrics_of(tmp_path / "b") == metrics_of(out)


def test_a_named_baseline_runs_beside_the_others_and_every_comparison_is_against_it(made_up_dataset: Path,
                                                                                     tmp_path: Path) -> None:
    done = run_eval("run", "--dataset", str(made_up_dataset), "--folds", "2", "--predictors", "majority,linear",
                    "--baseline", "knn", "--no-calibrate", "--quiet", "--out", str(tmp_path / "out"),
                    state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["config"]["baseline"] == "knn" and results["config"]["calibrate"] is False
    evaluation = results["evaluations"][0]
    assert list(evaluation["predictors"]) == ["knn", "majority", "linear"]
    assert evaluation["paired"]["reference"] == "knn"
    assert set(evaluation["paired"]["comparisons"]) == {"majority", "linear"}
    errors = evaluation["predictors"]["majority"]["axes"]["symptom"]["errors"]
    assert errors and all(gold != predicted and n > 0 for gold, predicted, n in errors)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Paired comparison with `knn`" in report and "Most frequent symptom errors" in report


def test_run_with_nothing_to_test_says_how_to_fix_it(tmp_path: Path) -> None:
    done = run_eval("run", "--out", str(tmp_path / "o"), state=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == ("eval: error: give --dataset PATH (a gold JSONL file) or --task NAME "
                                   "(python -m eval ls)")


def test_validate_passes_on_the_gold_data(gold_dir: Path, tmp_path: Path) -> None:
    done = run_eval("validate", "--data-dir", str(gold_dir), state=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ok   " + str(gold_dir / "ddl-dev.jsonl") in done.stdout
    assert "taxonomy liu23-native" in done.stdout and "benchmark ddl-dev-cv" in done.stdout
    assert "diagnostics diagnostics-v1" in done.stdout


def test_validate_stops_on_bad_lines_naming_file_line_and_field(tmp_path: Path) -> None:
    good, bad_label = made_up_records()[:2]
    bad_label["labels"] = {**bad_label["labels"], "symptom": "it_exploded"}  # type: ignore[dict-item]
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad_label) + "\n{\"id\": \n")
    done = run_eval("validate", "--dataset", str(path), state=tmp_path)
    assert done.returncode == 1
    assert f"{path}:2: 'it_exploded' is not a symptom of taxonomy ddl-v1" in done.stderr
    assert "(field 'labels.symptom')" in done.stderr
    assert f"{path}:3: not JSON" in done.stderr
    assert "Traceback" not in done.stderr


def test_ls_lists_the_versioned_definitions(tmp_path: Path) -> None:
    done = run_eval("ls", state=tmp_path)
    assert done.returncode == 0
    assert ("| ddl-dev-cv | 4 | cv | ddl-dev.jsonl, ddl-dev-r3.jsonl, ddl-dev-r4.jsonl | other folds + liu23.jsonl "
            "| 5 | 5 | 0 |" in done.stdout)
    assert "| ddl-dev-lofo | 2 | leave one framework out |" in done.stdout
    assert "| ddl-dev-temporal | 1 | temporal (newest 20% per repository) |" in done.stdout


def test_llm_answers_are_cached_so_rescoring_costs_nothing(made_up_dataset: Path, tmp_path: Path) -> None:
    answer = json.dumps({"kind": "bug_report", "stage": "training", "symptom": "out_of_memory",
                         "root_cause": "resource_limit", "fix_pattern": "distributed_feature_tuning"})
    with FakeChatServer().running() as server:
        server.answers.extend([answer] * 30)
        env = {"DDL_TRIAGE_LLM": "openai:fake-model", "DDL_TRIAGE_LLM_BASE_URL": server.base_url}
        args = ["run", "--dataset", str(made_up_dataset), "--folds", "2", "--predictors", "llm", "--quiet"]
        first = run_eval(*args, "--out", str(tmp_path / "a"), state=tmp_path / "state", extra_env=env)
        assert first.returncode == 0, first.stderr
        again = run_eval(*args, "--out", str(tmp_path / "b"), state=tmp_path / "state", extra_env=env)
        assert again.returncode == 0, again.stderr
    assert len(server.requests) == 24  # one per test record, none on the rerun
    runs = [json.loads((tmp_path / d / "results.json").read_text()) for d in ("a", "b")]
    usage = [r["evaluations"][0]["predictors"]["llm"]["usage"] for r in runs]
    assert usage[0]["calls"] == 24 and usage[0]["prompt_tokens"] == 2400 and usage[0]["latency_s"] > 0
    assert usage[1]["calls"] == 0 and usage[1]["cache_hits"] == 24
    assert runs[0]["config"]["settings"]["llm"] == "openai:fake-model"
    assert runs[0]["evaluations"][0]["predictors"]["llm"]["describe"]["prompt"] == "triage-v1"
    assert metrics_of(tmp_path / "a") == metrics_of(tmp_path / "b")
    assert "LLM usage" in (tmp_path / "a" / "report.md").read_text()


def test_transfer_trains_on_one_file_and_tests_all_of_another(tmp_path: Path) -> None:
    records = made_up_records()
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in records[::2]))
    test.write_text("".join(json.dumps(r) + "\n" for r in [*records[1::2], records[0]]))  # records[0] also in train
    done = run_eval("run", "--dataset", str(test), "--train-on", str(train), "--predictors", "knn", "--quiet",
                    "--out", str(tmp_path / "o"), state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    evaluation = json.loads((tmp_path / "o" / "results.json").read_text())["evaluations"][0]
    assert evaluation["mode"] == "transfer" and evaluation["folds"] == 1
    assert evaluation["leakage"]["train_dropped_as_copies"] >= 1  # the shared record never trains
    assert len(evaluation["predictors"]["knn"]["samples"]) == 13
    assert "cross-dataset transfer" in (tmp_path / "o" / "report.md").read_text()
