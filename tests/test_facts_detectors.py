"""Asks that read the post (issue #21): each fact's detector, on a positive, a near miss and a real-looking post
(all written for these tests), the section-heading rule, and the rules of what is never asked."""

from __future__ import annotations

import pytest

from bot.core.domain import Diagnosis, Issue
from bot.knowledge.facts import (
    analyses_cause,
    asks_to_show,
    compares_settings,
    fact_shown,
    framework_of,
    missing_facts,
    proposes_own_fix,
    reads_as_inference,
)
from bot.knowledge.taxonomy import Taxonomy
from bot.reading.normalise import normalise

# fact: (a positive, a near miss, a real-looking post)
DETECTORS: dict[str, tuple[str, str, str]] = {
    "torch_version": ("torch==2.3.1", "I use torch and CUDA on the cluster.",
                      "Environment:\n- PyTorch version: 2.1.0\n- OS: Ubuntu 22.04\nThe run stops at step 3."),
    "cuda_version": ("CUDA 12.1", "The input_ids cannot be processed by the kernels.",
                     "I built the wheel myself; `nvcc --version` says release 11.8, V11.8.89."),
    "framework_version": ("with our current 0.12.5 install", "DeepSpeed was installed from pip.",
                          "I am on the fix-zero3-offload branch (pip install git+https://github.com/deepspeedai/"
                          "DeepSpeed@3f2a9c1) and it still fails."),
    "te_version": ("transformer-engine 1.7.0", "Transformer Engine is installed.",
                   "We run the container image nvcr.io/nvidia/pytorch:24.03-py3 on every node."),
    "versions": ("DeepSpeed general environment info:", "I ran ds_report and it looked fine.",
                 "ds_report says:\n```\nDeepSpeed C++/CUDA extension op report\n"
                 "op name ................ installed\n```"),
    "launch_command": ("torchrun --nproc_per_node 8 train.py", "I launched it as an array of jobs.",
                       "```bash\nexport GPUS_PER_NODE=8\nsrun python pretrain_gpt.py $ARGS\n```"),
    "nccl_debug": ("export NCCL_DEBUG=INFO", "NCCL error: unhandled system error on rank 3.",
                   "My launch script:\n```\nexport NCCL_DEBUG=INFO\nexport NCCL_IB_DISABLE=1\n"
                   "deepspeed --hostfile hosts train.py\n```\nand the run stops after init."),
    "traceback": ("Traceback (most recent call last):", "It does not work as I expected.",
                  "It breaks at the first step:\n```\n  File \"train.py\", line 88, in <module>\n"
                  "    engine.step()\nKeyError: 'exp_avg'\n```"),
    "compiler_error": ("nvcc fatal : Unsupported gpu architecture 'compute_90'", "The build takes an hour.",
                       "pip install fails:\n```\ncsrc/adam/fused_adam.cu(12): error: identifier \"__half\" is "
                       "undefined\nninja: build stopped: subcommand failed.\n```"),
    "memory_setup": ('"stage": 3', "Memory grows slowly during the epoch.",
                     'ds_config.json:\n```json\n{"train_micro_batch_size_per_gpu": 4, "zero_optimization": '
                     '{"stage": 3, "offload_param": {"device": "cpu"}}}\n```'),
    "precision_setup": ("torch_dtype=torch.bfloat16", "The loss goes up after a hundred steps.",
                        "```python\nmodel = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float16)\n"
                        "optimizer = AdamW(model.parameters(), lr=2e-5)\n```"),
    "hardware": ("8 x A100 80GB", "The GPU utilisation drops in the output of the process.",
                 "Two nodes with eight H800 each, connected by InfiniBand; the job stops at the first all-reduce."),
    "gpu_model": ("GPU 0: NVIDIA H100 80GB HBM3", "My GPU is fast enough for this.",
                  "`torch.cuda.get_device_capability()` returns (8, 9) and the build lacks that architecture."),
    "dmesg": ("Out of memory: Killed process 4242 (python)", "The process was killed somehow.",
              "dmesg -T on node 2 at that minute:\n```\n[Tue Jun  4 10:02:11 2024] "
              "oom-kill:constraint=CONSTRAINT_NONE\n```"),
    "backtrace": ("Fatal Python error: Segmentation fault", "It crashes with a segfault.",
                  "With python -X faulthandler:\n```\nCurrent thread 0x00007f1c (most recent call first):\n"
                  "  File \"fused.py\", line 40 in forward\n```"),
    "stack_dump": ("py-spy dump --pid 31337", "The stack trace is below.",
                   "While it hangs, on rank 5:\n```\nThread 31337 (active): \"MainThread\"\n    barrier "
                   "(torch/distributed/distributed_c10d.py:3696)\n```"),
}


def _shown(taxonomy: Taxonomy, fact: str, body: str, repo: str = "deepspeedai/DeepSpeed") -> bool:
    issue = Issue(title="A report", body=body, repo=repo)
    environment = normalise(issue).environment
    text = f"{issue.title}\n{normalise(issue).body}"
    return fact_shown(taxonomy, taxonomy.fact(fact), text, environment, framework_of(issue, environment), body)


@pytest.mark.parametrize("fact", sorted(DETECTORS))
def test_each_detector_sees_its_fact_and_not_its_near_miss(fact: str, taxonomy: Taxonomy) -> None:
    positive, near_miss, post = DETECTORS[fact]
    assert _shown(taxonomy, fact, positive), positive
    assert not _shown(taxonomy, fact, near_miss), near_miss
    assert _shown(taxonomy, fact, post), post


def test_every_fact_of_the_taxonomy_has_its_detector_test(taxonomy: Taxonomy) -> None:
    assert sorted(DETECTORS) == sorted(f.id for f in taxonomy.facts)


TEMPLATE_LEFT = "Please run `ds_report` to give us details about your setup."


@pytest.mark.parametrize(("fact", "body"), [
    ("versions", f"### ds_report output\n{TEMPLATE_LEFT}\n![image](https://github.com/user-attachments/assets/1f2e)"),
    ("framework_version", "**ds_report output**\n\n<img width=\"900\" alt=\"ds_report\" src=\"https://x.invalid/a.png\">"),
    ("nccl_debug", "NCCL log:\n<details><summary>rank 0</summary>\n\n(the log)\n</details>"),
    ("traceback", "## Error log\n<details>\n<summary>click</summary>\n</details>"),
    ("launch_command", "### Launch script\n[run.sh](https://x.invalid/run.txt)"),
])
def test_a_heading_naming_the_fact_over_a_screenshot_or_collapsed_block_shows_it(fact: str, body: str,
                                                                                   taxonomy: Taxonomy) -> None:
    assert _shown(taxonomy, fact, body)


@pytest.mark.parametrize(("fact", "body"), [
    ("versions", f"**ds_report output**\n{TEMPLATE_LEFT}\n\n**Screenshots**\n"),  # the template left unfilled
    ("versions", "### Screenshots\n![image](https://github.com/user-attachments/assets/1f2e)"),  # another heading
    ("nccl_debug", "NCCL log:\nI will attach it later.\n![image](https://x.invalid/a.png)"),  # text first
])
def test_a_heading_without_the_fact_under_it_does_not(fact: str, body: str, taxonomy: Taxonomy) -> None:
    assert not _shown(taxonomy, fact, body)


def _asked(title: str, body: str, taxonomy: Taxonomy, symptom: str | None, *, stage: str | None = None,
           diagnoses: tuple[Diagnosis, ...] = ()) -> list[str]:
    issue = Issue(title=title, body=body, repo="deepspeedai/DeepSpeed")
    return missing_facts(issue, normalise(issue).environment, taxonomy, "bug_report", symptom, diagnoses=diagnoses,
                         stage=stage)


def test_no_training_setting_is_asked_of_an_inference_issue(taxonomy: Taxonomy) -> None:
    body = ("The generated text is garbage after the first few tokens, while the same checkpoint loaded with plain "
            "transformers generates fine on one GPU.")
    assert "precision_setup" in _asked("Outputs differ after a few tokens", body, taxonomy, "incorrect_output")
    assert "precision_setup" not in _asked("Outputs differ after a few tokens", body, taxonomy, "incorrect_output",
                                           stage="inference")
    assert "precision_setup" not in _asked("init_inference with kernel injection gives garbage", body, taxonomy,
                                           "incorrect_output")
    assert reads_as_inference("FastGen serving returns empty strings", None)
    assert not reads_as_inference("Loss spikes after resuming", None)
    assert not reads_as_inference("FastGen serving returns empty strings", "training")  # the stage decides


@pytest.mark.parametrize("text", [
    "Training works with ZeRO stage 2 but fails with stage 3.",
    "With stage 2 it works; with stage 3 it hangs at step 1.",
    "It runs out of memory when offload is off, but works when I turn offload on.",
    "bf16 works fine, whereas fp16 diverges after 200 steps.",
    "ZeRO-3 fails, ZeRO-2 fine.",
])
def test_a_report_comparing_two_settings_is_recognised(text: str) -> None:
    assert compares_settings(text)


@pytest.mark.parametrize("text", ["Everything works fine until step 100 where it crashes.",
                                  "It worked yesterday.", "The training fails with an error.",
                                  "When I train with 8 GPUs, it fails at the first step."])
def test_a_report_of_one_setting_is_not_a_comparison(text: str) -> None:
    assert not compares_settings(text)


def test_no_environment_ask_on_a_report_comparing_two_settings_on_one_environment(taxonomy: Taxonomy) -> None:
    compared = ("On the same 8-GPU machine the model trains with ZeRO stage 2 but fails with stage 3: every rank "
                "raises an error in the optimizer step. Nothing else changed.")
    single = ("On my 8-GPU machine the model fails with ZeRO stage 3: every rank raises an error in the optimizer "
              "step right after the first batch.")
    assert "versions" not in _asked("ZeRO-3 fails, ZeRO-2 fine", compared, taxonomy, "api_exception")
    assert "versions" in _asked("ZeRO-3 fails in the optimizer step", single, taxonomy, "api_exception")


def test_one_ask_unless_both_block_the_next_step() -> None:
    assert asks_to_show(["traceback", "versions"], []) == ["traceback"]
    assert asks_to_show(["traceback", "versions"], ["traceback"]) == ["traceback"]
    assert asks_to_show(["gpu_model", "backtrace"], ["gpu_model", "backtrace"]) == ["gpu_model", "backtrace"]
    assert asks_to_show([], ["gpu_model"]) == []
    # beside a next step, no ask rides along, not even the diagnosis's own
    assert asks_to_show(["versions", "traceback"], ["versions"], next_step=True) == []


@pytest.mark.parametrize(("text", "own"), [
    ("Created MRs to temporarily prevent using these flags together: https://example.org/pull/12", True),
    ("I have opened a PR to fix this: #4242", True),
    ("Fixed in https://github.com/NVIDIA/Megatron-LM/pull/4769.", True),
    ("See my PR for the two-line change.", True),
    ("Is there a PR that fixes this?", False),  # asking for one
    ("Could you create a pull request?", False),
    ("PR #123 broke my run after the upgrade.", False),
    ("I tried the fix from the docs and it still fails.", False),
    ("The error goes away: this problem is solved by removing the two arguments from init_process_group.", True),
    ("We worked around it by setting the flag to false in our launcher.", True),
    ("Is this issue fixed by setting a larger timeout?", False),  # asking
    ("The problem is not fixed by upgrading; it still hangs.", False),
    # a section of the post that holds the change itself
    ("**Fix suggestions**\n\nModify runner.py#L230 to an f-string.", True),
    ("## Proposed fix\nPass the group to all_reduce.", True),
    ("Suggested fix:\n```diff\n- a\n+ b\n```", True),
    ("Any suggested fix for this?", False),  # asking for one
    ("The fix suggestions in the docs do not work for me.", False),  # prose, not a section
    ("**Proposed fix**\nIf you have a proposal for how to fix the issue state it here or link to a PR.\n\n"
     "**Additional context**", False),  # Megatron-LM's regression template, unfilled
    ("### Proposed solution\nNone\n", False),
    ("**Proposed fix**\n\n**Additional context**\nNothing.", False),  # an empty section
])
def test_a_post_that_brings_its_own_fix_is_recognised(text: str, own: bool) -> None:
    assert proposes_own_fix(text) is own


@pytest.mark.parametrize(("text", "analysed"), [
    ("See https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/foo/bar.py#L131: self.tp_size should be "
     "removed.", True),
    ("Partitioning leaves two stages empty: https://github.com/deepspeedai/DeepSpeed/blob/abc/deepspeed/runtime/pipe/"
     "module.py#L391", False),  # the line that raised, linked: no analysis of why
    ("With a debugger and weakrefs I was able to trace it down to the mapping added on each parameter.", True),
    ("It turns out that the output is fp16 while the labels stay fp32.", True),
    ("The root cause is the integer division in the layer count.", True),
    ("The extra scaling in the all-reduce should be removed.", True),
    ("My script is at https://github.com/someone/my-trainer/blob/main/train.py#L40", False),  # the reporter's own code
    ("The docs at https://github.com/deepspeedai/DeepSpeed/blob/master/docs/config.md say nothing about it.", False),
    ("What is the root cause of this error?", False),  # asking for one
    ("The problem is that GPU 1 uses more memory than the others.", False),  # a symptom, not a cause
    ("Should the flag be removed from my config?", False),
])
def test_a_post_that_locates_its_own_cause_in_the_code_is_recognised(text: str, analysed: bool) -> None:
    assert analyses_cause(text) is analysed
