"""Missing facts and too-little-text, tested on the real gold texts (read in place, never copied)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.core.domain import Diagnosis, Issue
from bot.knowledge.diagnostics import load_diagnostics
from bot.knowledge.facts import fact_present, fact_shown, framework_of, missing_facts, needs_details
from bot.knowledge.taxonomy import Taxonomy
from bot.reading.normalise import normalise

# Unmistakable evidence of a fact in a text, independent of the taxonomy's own (broader) patterns.
EVIDENCE = {
    "nccl_debug": r"NCCL INFO",
    "traceback": r"Traceback \(most recent call last\)",
    "torch_version": r"torch version\s*[.:]*\s*\d",
    "cuda_version": r"cuda version\s*[.:]*\s*\d",
    "launch_command": r"\b(torchrun|deepspeed --|mpirun)\b",
    "memory_setup": r"micro_batch_size|zero_optimization",
    "precision_setup": r"\bbf16\b|\bfp16\b",
    "versions": r"op name \.{4,}|DeepSpeed general environment info",
}


@pytest.fixture(scope="module")
def gold_issues(gold_dir: Path) -> list[Issue]:
    issues = []
    for name in ("ddl-dev.jsonl", "ddl-dev-r3.jsonl"):
        for line in (gold_dir / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            issues.append(Issue(id=record["id"], title=record["title"] or "", body=record["body"] or "",
                                repo=record["repo"]))
    return issues


@pytest.mark.parametrize("fact", sorted(EVIDENCE))
def test_a_fact_the_gold_text_shows_is_never_asked_for(fact: str, gold_issues: list[Issue],
                                                       taxonomy: Taxonomy) -> None:
    showing = [i for i in gold_issues if re.search(EVIDENCE[fact], f"{i.title}\n{i.body}", re.IGNORECASE)]
    assert len(showing) >= 3, f"too few gold texts show {fact} to test it"
    symptoms = [v.id for v in taxonomy.axis("symptom").values if fact in v.ask_for] or [None]
    for issue in showing:
        environment = normalise(issue).environment
        shown = fact_shown(taxonomy, taxonomy.fact(fact), f"{issue.title}\n{issue.body}", environment,
                           framework_of(issue, environment))
        assert shown, issue.id
        for symptom in symptoms:
            assert fact not in missing_facts(issue, environment, taxonomy, "bug_report", symptom), issue.id


def _asked(title: str, body: str, taxonomy: Taxonomy, symptom: str | None, *, repo: str | None = None,
           kind: str | None = "bug_report", diagnoses: tuple[Diagnosis, ...] = ()) -> list[str]:
    issue = Issue(title=title, body=body, repo=repo)
    return missing_facts(issue, normalise(issue).environment, taxonomy, kind, symptom, diagnoses=diagnoses)


def test_absent_facts_are_asked_for_what_the_symptom_needs_at_most_two_and_only_for_bug_reports(
        taxonomy: Taxonomy) -> None:
    body = ("After a few hundred steps every rank stops making progress and nothing is printed any more, "
            "GPU utilisation drops to zero.")
    asked = _asked("Training hangs", body, taxonomy, "hang_timeout")
    assert asked == ["nccl_debug", "hardware"]  # what a hang needs, not the generic versions
    assert _asked("Training hangs", body, taxonomy, "hang_timeout", kind="usage_question") == []
    assert _asked("Training hangs", body, taxonomy, None, kind=None) == []
    assert _asked("How do I use ZeRO-3 with LoRA?", "Is it supported?", taxonomy, None, kind="feature_request") == []


def test_versions_given_in_prose_count_as_present(taxonomy: Taxonomy) -> None:
    for prose in ("I am on the latest 0.9.2 of the library", "with our current 0.12.5 install",
                  "using release v0.14.1 from pip"):
        body = f"RuntimeError: something broke in the optimizer step. {prose}."
        fact = taxonomy.fact("framework_version")
        assert fact_present(fact, body, normalise(Issue(body=body)).environment), prose


def test_a_launch_script_with_gpus_per_node_shows_the_launch_and_the_hardware(taxonomy: Taxonomy) -> None:
    script = "```bash\nGPUS_PER_NODE=2\nNNODES=1\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n```\nthen it hangs."
    asked = _asked("Run stops at the first allreduce", script, taxonomy, "unexpected_parallelization")
    assert "launch_command" not in asked
    assert "hardware" not in _asked("Run stops at the first allreduce", script, taxonomy, "hang_timeout")


def test_a_plural_gpu_model_in_the_system_info_shows_the_hardware(taxonomy: Taxonomy) -> None:
    info = "**System info**\n - GPU count and types: a single node with x8 H800s\n - deepspeed 0.14.4"
    assert "hardware" not in _asked("Run stops at the first allreduce", info, taxonomy, "hang_timeout")


def test_a_pasted_ds_report_replaces_every_version_ask_and_an_unfilled_template_does_not(
        taxonomy: Taxonomy) -> None:
    report = ("**ds_report output**\n```\n--------------------------------------------------\n"
              "DeepSpeed C++/CUDA extension op report\n----------\nop name ................ installed .. "
              "compatible\nfused_adam ............. [NO] ....... [OKAY]\n```")
    error = "ImportError: cannot import name 'FusedAdam' from the ops package"
    asked = _asked("Import fails", f"{error}\n{report}", taxonomy, "import_error", repo="deepspeedai/DeepSpeed")
    assert asked == []
    template = "**ds_report output**\nPlease run `ds_report` to give us details about your setup.\n"
    asked = _asked("Import fails", f"{error}\n{template}", taxonomy, "import_error", repo="deepspeedai/DeepSpeed")
    assert asked == ["versions"]
    assert taxonomy.fact("versions").ask_for("DeepSpeed") == "the output of `ds_report`"


def test_a_pip_build_failure_is_never_asked_for_a_launch_command(taxonomy: Taxonomy) -> None:
    body = "pip install fails:\n  error: subprocess-exited-with-error\n  nvcc fatal : Unsupported gpu architecture"
    build = Diagnosis(id="build", title="op build", reading="r", next_step="s",
                      symptoms=["installation_build_failure"], ask="launch_command")
    for symptom in ("installation_build_failure", "import_error", None):
        asked = _asked("Cannot install", body, taxonomy, symptom, diagnoses=(build,))
        assert "launch_command" not in asked, symptom


def test_each_project_is_asked_in_its_own_words_and_never_with_another_projects_command(
        taxonomy: Taxonomy) -> None:
    body = "The fused kernel raises RuntimeError: CUDA error: an illegal memory access was encountered"
    words = {repo: [taxonomy.fact(f).ask_for(framework_of(Issue(repo=repo), normalise(Issue(body=body)).environment))
                    for f in _asked("Crash", body, taxonomy, "segmentation_fault", repo=repo)]
             for repo in ("deepspeedai/DeepSpeed", "hpcaitech/ColossalAI", "NVIDIA/Megatron-LM", None)}
    assert "the output of `ds_report`" in words["deepspeedai/DeepSpeed"]
    assert "the output of `colossalai check -i`" in words["hpcaitech/ColossalAI"]
    assert any("Transformer Engine" in w and "git rev-parse HEAD" in w for w in words["NVIDIA/Megatron-LM"])
    for repo in ("hpcaitech/ColossalAI", "NVIDIA/Megatron-LM", None):
        assert not any(re.search(r"ds_report|DS_BUILD|deepspeed", w, re.IGNORECASE) for w in words[repo]), repo
    for fact in taxonomy.facts:  # the plain wording serves every project: it names no project's own command
        assert not re.search(r"ds_report|DS_BUILD|colossalai check", fact.ask), fact.id


def test_a_colossal_ai_issue_that_mentions_deepspeed_is_asked_in_colossal_ai_words(taxonomy: Taxonomy) -> None:
    issue = Issue(title="Gemini plugin crashes", repo="hpcaitech/ColossalAI",
                  body="Moving from deepspeed 0.10.0 to the gemini plugin, ImportError: no module named fused_optim")
    environment = normalise(issue).environment
    assert environment.framework == "DeepSpeed"  # what the text names first
    assert framework_of(issue, environment) == "Colossal-AI"


def test_a_megatron_report_without_the_transformer_engine_version_is_asked_for_it(taxonomy: Taxonomy) -> None:
    body = ("megatron-core 0.9.0, torch 2.4, CUDA 12.4\nAttributeError: module has no attribute "
            "'get_cpu_offload_context' raised from the TE layer spec")
    assert _asked("TE layer fails", body, taxonomy, "api_exception", repo="NVIDIA/Megatron-LM") == ["te_version"]
    assert _asked("TE layer fails", body.replace("megatron-core 0.9.0, ", ""), taxonomy, "api_exception",
                  repo="NVIDIA/Megatron-LM") == ["versions"]  # neither part shown: the one ask names both
    assert _asked("TE layer fails", body + "\ntransformer-engine 1.11.0", taxonomy, "api_exception",
                  repo="NVIDIA/Megatron-LM") == []
    assert _asked("TE layer fails", body, taxonomy, "api_exception", repo="deepspeedai/DeepSpeed") == []


def test_a_report_that_says_it_fails_without_the_error_is_asked_for_the_error_itself(taxonomy: Taxonomy) -> None:
    body = "When I launch the pretraining script on two machines it fails with an error, no idea why at all."
    assert _asked("Pretraining broken", body, taxonomy, None) == ["traceback"]
    with_error = body + "\nValueError: world size 3 is not divisible by pipeline parallel size 2"
    assert "traceback" not in _asked("Pretraining broken", with_error, taxonomy, None)
    frames = body + '\n[rank3]:   File "/opt/venv/lib/python3.11/site-packages/mylib/engine.py", line 88, in step'
    assert "traceback" not in _asked("Pretraining broken", frames, taxonomy, None)


def test_a_report_of_wrong_behaviour_without_a_failure_is_not_asked_for_a_traceback(taxonomy: Taxonomy) -> None:
    body = ("With TP=2 the loss curve drifts away from the single-GPU run after 2k steps; the absolute error "
            "between the two reaches 40. Both runs use the same seed and data order.")
    for symptom in (None, "incorrect_output", "api_exception"):
        assert "traceback" not in _asked("TP loss differs from one GPU", body, taxonomy, symptom), symptom


def test_a_gpu_named_in_chinese_prose_counts_as_the_hardware(taxonomy: Taxonomy) -> None:
    body = "在四张H100显卡上训练，每张卡80G显存，NCCL 通信一直卡住不动"
    assert "hardware" not in _asked("训练卡住", body, taxonomy, "hang_timeout")


def test_the_fact_a_diagnosis_needs_is_asked_first(taxonomy: Taxonomy) -> None:
    body = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    kernel = Diagnosis(id="no_kernel_image", title="No kernel image", reading="r", next_step="s",
                       symptoms=["device_error"], ask="hardware")
    assert _asked("Kernel error", body, taxonomy, "api_exception", diagnoses=(kernel,))[0] == "hardware"
    unknown = kernel.model_copy(update={"ask": "a_fact_no_taxonomy_has"})
    assert "a_fact_no_taxonomy_has" not in _asked("Kernel error", body, taxonomy, "device_error", diagnoses=(unknown,))


def test_an_empty_or_bare_title_issue_needs_details_and_a_real_report_does_not(gold_issues: list[Issue]) -> None:
    assert needs_details(normalise(Issue(title="", body="")))
    assert needs_details(normalise(Issue(title="DeepSpeed ZeRO-3 does not work", body="")))
    assert needs_details(normalise(Issue(title="bug", body="### Describe the bug\n\n### To Reproduce\n\n")))
    detailed = [i for i in gold_issues if len(i.body) > 1000]
    assert detailed and not any(needs_details(normalise(i)) for i in detailed)


def test_a_post_in_chinese_or_an_error_in_the_title_is_not_bare() -> None:
    # two CJK characters count as a word: a report written in Chinese is read, not taken for an empty template
    chinese = ("多机多卡训练，运行相同的脚本，使用相同的硬件环境。使用 colossalai run 命令时，另一个节点找不到网络设备"
               "（No Socket interface found），但是使用 torchrun 可以正常运行。")
    assert not needs_details(normalise(Issue(title="colossalai run 多机问题", body=chinese)))
    assert needs_details(normalise(Issue(title="bug", body="报错了，怎么办")))  # a few characters are still bare
    # the title quotes the error, the body only the code that raised it
    code = "```\nfrom megatron.core.transformer.custom_layers.transformer_engine import TENorm\n```"
    assert not needs_details(normalise(Issue(title="[BUG]ModuleNotFoundError: No module named 'transformer_engine'",
                                             body=code)))
    assert needs_details(normalise(Issue(title="[BUG] import fails", body=code)))
    # a title that only asks about an error is no error line
    assert needs_details(normalise(Issue(title="What does this ValueError: mean?", body="")))


def test_every_fact_pattern_of_the_shipped_taxonomy_compiles_and_is_referenced(taxonomy: Taxonomy) -> None:
    referenced = set(taxonomy.ask_for_any_bug) | {f for v in taxonomy.axis("symptom").values for f in v.ask_for}
    referenced |= {p for f in taxonomy.facts for p in (*f.all_of, *(x for ps in f.all_of_by_framework.values()
                                                                      for x in ps))}
    referenced |= {e.ask for e in load_diagnostics().entries if e.ask}  # the diagnostic knowledge base's asks
    assert referenced <= {f.id for f in taxonomy.facts}
    assert {f.id for f in taxonomy.facts} <= referenced | {"versions"}, "a fact nothing asks for"
