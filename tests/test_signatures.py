"""Error signatures: one digest for one failure however it was reported, different digests for different failures,
none for what is too generic, and bounded work on hostile text (snippets written for these tests)."""

from __future__ import annotations

import random
import time

import pytest

from bot.core.domain import Issue
from bot.reading.canonical import canonical_message
from bot.reading.normalise import normalise
from bot.reading.signatures import KINDS, error_signatures, signature, tells_mechanism


def digests(text: str, kind: str | None = None) -> set[str]:
    return {s.digest for s in error_signatures(text) if kind in (None, s.kind)}


def texts(text: str, kind: str) -> list[str]:
    return [s.text for s in error_signatures(text) if s.kind == kind]


def test_the_same_oom_on_other_ranks_sizes_gpus_and_timestamps_gives_one_digest() -> None:
    reports = [
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
        "capacity of 79.15 GiB of which 1.07 GiB is free.",
        "2025-06-01 10:02:11,554 [rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. "
        "GPU 0 has a total capacity of 39.39 GiB of which 88.00 MiB is free.",
        "1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20 MiB (GPU 1; 23.65 GiB total capacity)",
    ]
    exception = [digests(r, "exception") for r in reports]
    assert exception[0] == exception[1] == exception[2] and len(exception[0]) == 1
    assert [texts(r, "cuda") for r in reports] == [["CUDA out of memory"]] * 3
    old_torch = digests("RuntimeError: CUDA out of memory. Tried to allocate 1.20 GiB (GPU 0; 15.78 GiB total "
                        "capacity; 13.10 GiB already allocated)", "cuda")
    assert old_torch == digests(reports[0], "cuda")  # another class name, the same CUDA failure


def test_the_same_failure_with_other_paths_line_numbers_addresses_and_pids_gives_one_digest() -> None:
    first = ("torch.distributed.DistBackendError: NCCL error in: /usr/local/src/pytorch/torch/csrc/distributed/c10d/"
             "NCCLUtils.hpp:275, unhandled system error, NCCL version 2.20.5\n"
             "Last error: socketStartConnect: Connect to 10.3.1.17<43711> failed : Software caused connection abort\n"
             "Segmentation fault (core dumped) in pid 4121 at 0x7f9a02c4be10")
    second = ("torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/"
              "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
              "details), NCCL version 2.21.5\nSegmentation fault (core dumped) in pid 977 at 0x55d3c81a0000")
    assert digests(first) == digests(second)
    assert texts(first, "nccl") == ["ncclSystemError"]
    assert texts(first, "signal") == ["SIGSEGV"]


def test_assertions_keep_their_config_keys_and_lose_their_numbers() -> None:
    a = ("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
         "gradient_acc_step * world_size 512 != 4 * 16 * 4")
    b = ("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
         "gradient_acc_step * world_size 96 != 2 * 3 * 8")
    assert digests(a) == digests(b)
    assert "train_batch_size" in texts(a, "assertion")[0]
    heads = "AssertionError: num_attention_heads ({}) must be divisible by tensor_model_parallel_size ({})"
    kv = "AssertionError: num_query_groups ({}) must be divisible by tensor_model_parallel_size ({})"
    assert digests(heads.format(30, 4)) == digests(heads.format(52, 8)) != digests(kv.format(2, 4))


def test_what_distinguishes_failures_keeps_their_digests_apart() -> None:
    different = [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: device-side assert triggered",
        "RuntimeError: CUDA error: misaligned address",
        "ModuleNotFoundError: No module named 'flash_attn'",
        "ModuleNotFoundError: No module named 'flash_attn.layers'",
        "ImportError: cannot import name 'get_accelerator' from 'deepspeed.accelerator'",
        "KeyError: 'zero_optimization'",
        "KeyError: 'optimizer'",
        "RuntimeError: Error building extension 'fused_adam'",
        "RuntimeError: Error building extension 'inference_core_ops'",
    ]
    found = [digests(t) for t in different]
    for i, a in enumerate(found):
        assert a, different[i]
        for b in found[i + 1:]:
            assert not a & b
    assert texts(different[4], "missing_module") == ["No module named 'flash_attn.layers'"]


def test_each_kind_of_library_error_gets_its_own_signature() -> None:
    expected = {
        "RuntimeError: CUDA error: no kernel image is available for execution on the device":
            ("no_kernel_image", "no kernel image is available for execution on the device"),
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a "
        "non-contiguous input.": ("cuda", "CUDNN_STATUS_NOT_SUPPORTED"),
        "[E ProcessGroupNCCL.cpp:475] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
        "OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800425 milliseconds before timing "
        "out.": ("nccl", "Watchdog caught collective operation timeout"),
        "ImportError: /venv/lib/python3.11/site-packages/fused_layer_norm_cuda.cpython-311-x86_64-linux-gnu.so: "
        "undefined symbol: _ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE":
            ("undefined_symbol",
             "undefined symbol: _ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE"),
        "OSError: libcudart.so.12: cannot open shared object file: No such file or directory":
            ("missing_library", "libcudart.so: cannot open shared object file"),
        "error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1": ("build", "command 'nvcc' failed"),
        "ninja: build stopped: subcommand failed.": ("build", "ninja: build stopped: subcommand failed"),
        "/tmp/pip-install-x1/csrc/adam/multi_tensor_adam.cu(41): error: identifier \"__hmul2\" is undefined":
            ("build", "compile error: identifier <VALUE> is undefined"),
        "[2025-05-05 01:01:01,000] [ERROR] [launch.py:325:sigkill_handler] ['python', 'train.py', "
        "'--local_rank=0'] exits with return code = -9": ("signal", "SIGKILL"),
        "srun: error: gpu-7: task 2: Exited with exit code 127": ("exit_code", "exit code 127"),
    }
    for text, (kind, canonical) in expected.items():
        assert canonical in texts(text, kind), (text, error_signatures(text))
    assert all(s.kind in KINDS for t in expected for s in error_signatures(t))


def test_the_authors_own_values_become_placeholders() -> None:
    assert canonical_message("Can't load tokenizer for 'acme-lab/llama-3-8b-sft-v2'. If you were trying") == \
        "Can't load tokenizer for <VALUE>"
    assert canonical_message("Error(s) in loading state_dict for MyTinyGPT:\n\tMissing key(s) in state_dict") == \
        "Error(s) in loading state_dict for <NAME>"
    assert canonical_message("[Errno 2] No such file or directory: '/mnt/data/shards/part-0007.bin'") == \
        "[Errno <N>] No such file or directory: '<PATH>'"
    assert canonical_message('The name "critic_head" is used 2 times in the model') == \
        "The name <VALUE> is used <N> times in the model"
    assert canonical_message("Rank 12 pid=40961 at 2025-01-01T08:00:00 addr 0x7ffd2a10 commit 9f3c2ab1d7e4 v0.16.4") \
        == "rank <RANK> PID <PID> at <TIME> addr <ADDR> commit <HEX> <VER>"


def test_a_failure_too_generic_to_tell_reports_apart_gets_no_signature() -> None:
    for text in ("error", "RuntimeError", "RuntimeError:", "AssertionError", "Exception: error",
                 "Something went wrong, error!", "IndexError: list index out of range",
                 "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.",
                 "[ERROR] [launch.py:325:sigkill_handler] ['python', 'x.py'] exits with return code = 1",
                 "Traceback (most recent call last):\n  File \"t.py\", line 3, in f\n    g()\nAssertionError"):
        assert error_signatures(text) == (), text


def test_a_bare_assertion_takes_its_message_from_the_assert_statement_shown() -> None:
    text = ('Traceback (most recent call last):\n'
            '  File "/venv/lib/python3.10/site-packages/deepspeed/runtime/zero/partition_parameters.py", line 1401, '
            'in _all_gather\n    assert param.ds_status == ZeroParamStatus.NOT_AVAILABLE, param.ds_summary()\n'
            'AssertionError')
    assert texts(text, "assertion") == ["AssertionError: assert param.ds_status == ZeroParamStatus.NOT_AVAILABLE, "
                                        "param.ds_summary()"]


def test_the_digest_is_a_stable_hash_of_kind_and_canonical_text() -> None:
    # Pinned: packs and repository memories store these digests; a change here makes every stored one stale.
    assert signature("cuda", "CUDA error: device-side assert triggered").digest == "bf314ed9c2445278"
    assert signature("exception", "x").digest != signature("assertion", "x").digest


def test_a_200_kb_paste_finishes_fast() -> None:
    """CPU time, not wall time: the machine running the tests may be busy."""
    noise = "\n".join(f"[rank{i % 8}]: [2025-01-01 00:00:{i % 60:02d}] iteration {i} | loss {i / 7:.4f} | "
                      f"grad norm 0.{i:05d} | tokens/s 31{i % 997}" for i in range(2500))
    tail = ("\n[rank2]: Traceback (most recent call last):\n"
            '[rank2]:   File "/w/train.py", line 3, in <module>\n[rank2]:     step()\n'
            "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    paste = noise + tail
    assert len(paste) > 200_000
    start = time.process_time()
    found = error_signatures(paste)
    assert time.process_time() - start < 2.0
    assert "CUDA error: an illegal memory access was encountered" in {s.text for s in found}


@pytest.mark.parametrize("junk", [
    "a." * 100_000,  # a dotted chain with no exception at its end
    "'" + "a" * 199_999,  # an unclosed quote
    "Error" * 40_000,
    "File \"" * 30_000,
    "[rank1]: " * 20_000 + "RuntimeError: x",
    "0x" + "f" * 199_998,
    ("/a" * 50_000) + ": error: " + "9" * 50_000,
    "\x00\xff\ufffd" * 60_000,
    "\n".join("  File \"/x.py\", line 1, in f" for _ in range(8000)),
    "\n".join(f"[rank{i}]: Traceback (most recent call last):" for i in range(12_000)),  # thousands of streams
    "NCCL WARN " + "x " * 90_000,
    "".join(chr(random.Random(7).randrange(0x20, 0x2FFF)) for _ in range(200_000)),
])
def test_hostile_input_is_read_without_error_in_bounded_time(junk: str) -> None:
    start = time.process_time()
    found = error_signatures(junk)
    assert time.process_time() - start < 2.0
    assert all(len(s.text) <= 300 and s.kind in KINDS for s in found)


@pytest.mark.parametrize(("body", "tells"), [
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", False),
    ("RuntimeError: CUDA error: out of memory", False),
    ("[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4021, OpType=ALLGATHER, "
     "Timeout(ms)=1800000) ran for 1800417 milliseconds before timing out.", False),
    ("RuntimeError: NCCL communicator was aborted on rank 3.", False),
    ("torch.distributed.DistBackendError: NCCL error in: ../csrc/NCCLUtils.hpp:219, unhandled system error, "
     "NCCL version 2.14.3", False),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", True),
    ("KeyError: 'module.embed_tokens.weight'", True),
])
def test_a_signature_tells_the_mechanism_unless_it_names_only_the_symptom(body: str, tells: bool) -> None:
    signatures = normalise(Issue(id="s", title="Training fails", body=body)).signatures
    assert signatures
    assert any(tells_mechanism(s) for s in signatures) is tells
