from __future__ import annotations

from bot.core.domain import Issue
from bot.reading.normalise import MAX_BODY_CHARS, MAX_INPUT_CHARS, MAX_SIGNAL_LINES, extract_environment, normalise

TEMPLATE = """**Describe the bug**
A clear and concise description of what the bug is.
ZeRO-3 training stops at step 10.

**To Reproduce**
Steps to reproduce the behavior:

**Screenshots**
If applicable, add screenshots to help explain your problem.

**Expected behavior**

**Additional context**
Add any other context about the problem here.
"""


def test_template_boilerplate_and_empty_sections_are_dropped() -> None:
    body = normalise(Issue(title="t", body=TEMPLATE)).body
    assert "ZeRO-3 training stops at step 10." in body
    for gone in ("clear and concise", "Steps to reproduce", "Screenshots", "Expected behavior", "Add any other"):
        assert gone not in body


def _huge_log() -> str:
    noise = "\n".join(f"[rank{i % 8}]: iteration {i} loss 2.{i:04d} lr 1e-4 tokens/s 1000" for i in range(20000))
    frames = "\n".join(f'  File "/opt/lib/module_{i}.py", line {i}, in f{i}\n    call_{i}()' for i in range(30))
    return (f"Training dies after a while.\n```\n{noise}\nTraceback (most recent call last):\n{frames}\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n```\n")


def test_a_megabyte_log_is_cut_to_its_signal() -> None:
    log = _huge_log()
    assert len(log) > 1_000_000
    result = normalise(Issue(title="OOM", body=log))
    assert len(result.body) <= 4100
    assert "Training dies after a while." in result.body
    assert "CUDA out of memory" in result.body
    assert 'module_29.py' in result.body and 'module_3.py"' not in result.body  # only the last frames
    assert result.signal[0].startswith("torch.OutOfMemoryError")


def test_lines_every_rank_repeats_are_kept_once() -> None:
    body = "\n".join(f"[rank{r}]: RuntimeError: NCCL error in ProcessGroupNCCL.cpp:1269" for r in range(8))
    assert normalise(Issue(title="t", body=body)).body.count("NCCL error") == 1


def test_environment_facts_are_extracted() -> None:
    text = ("deepspeed 0.14.2, torch 2.3.1+cu121, NCCL version 2.20.5, Python 3.10.14, "
            "2 nodes with 8x H100 each")
    env = extract_environment(text)
    assert env.model_dump() == {"framework": "DeepSpeed", "framework_version": "0.14.2", "torch": "2.3.1+cu121",
                                "cuda": "12.1", "nccl": "2.20.5", "python": "3.10.14", "gpu": "H100",
                                "gpu_count": 8, "nodes": 2}


def test_environment_from_launcher_flags_and_repo() -> None:
    env = extract_environment("torchrun --nnodes 4 --nproc_per_node 8 train.py", repo="NVIDIA/Megatron-LM")
    assert (env.framework, env.nodes, env.gpu_count) == ("Megatron-LM", 4, 8)


def test_an_empty_issue_normalises_to_nothing_without_error() -> None:
    result = normalise(Issue(title="", body=""))
    assert result.text == "" and result.environment.known() == {}


def test_a_long_one_line_paragraph_is_kept_not_emptied() -> None:
    paragraph = "When I enable ZeRO-3 with CPU offload the loss stays flat " * 80
    result = normalise(Issue(title="t", body=paragraph + "\nRuntimeError: NCCL error"))
    assert result.body.startswith("When I enable ZeRO-3")
    assert "RuntimeError: NCCL error" in result.body and len(result.body) <= 4100


def test_a_megabyte_of_headings_and_errors_keeps_the_head_and_at_most_the_first_signal_lines() -> None:
    body = "Intro line.\n" + "".join(f"## Section {i}\nValueError: bad value {i}\n" for i in range(40000))
    result = normalise(Issue(title="t", body=body))
    assert result.body.startswith("Intro line.") and len(result.body) <= MAX_BODY_CHARS + 100
    assert result.signal == tuple(f"ValueError: bad value {i}" for i in range(MAX_SIGNAL_LINES))


def test_the_final_error_of_a_megabyte_log_is_read_from_its_tail() -> None:
    """The error at the end of a giant paste lies beyond the head that the clip keeps: only its tail has it."""
    noise = "".join(f"## Section {i}\nstep {i}: loss 2.{i % 97:02d}\n" for i in range(40000))
    body = "Intro line.\n" + noise + "RuntimeError: NCCL communicator was aborted on rank 3\n"
    assert len(body) > 4 * MAX_INPUT_CHARS
    result = normalise(Issue(title="t", body=body))
    assert result.body.startswith("Intro line.")
    assert result.signal == ("RuntimeError: NCCL communicator was aborted on rank 3",)
    assert (result.failure.exception, result.failure.message) == ("RuntimeError",
                                                                  "NCCL communicator was aborted on rank 3")


def test_the_normaliser_reads_the_failure_and_its_signatures_once_from_title_and_body() -> None:
    issue = Issue(title="[BUG] ZeRO-3 init dies: RuntimeError: CUDA error: device-side assert triggered",
                  body="Launch:\n```\n[rank1]: Traceback (most recent call last):\n"
                       '[rank1]:   File "/venv/lib/python3.10/site-packages/deepspeed/__init__.py", line 181, '
                       "in initialize\n[rank1]:     engine = DeepSpeedEngine(args=args,\n"
                       "[rank1]: RuntimeError: CUDA error: device-side assert triggered\n```\n")
    result = normalise(issue)
    assert result.failure.exception == "RuntimeError" and result.failure.rank == 1
    assert [f.module for f in result.failure.frames] == ["deepspeed"]
    assert {s.kind for s in result.signatures} == {"exception", "cuda"}
    assert result.digests == tuple(sorted({s.digest for s in result.signatures}))
    title_only = normalise(Issue(title="ModuleNotFoundError: No module named 'megatron.core'", body="Any idea?"))
    assert [s.text for s in title_only.signatures if s.kind == "missing_module"] == ["No module named 'megatron.core'"]
    assert normalise(Issue(title="How do I shard optimizer states?", body="")).signatures == ()
