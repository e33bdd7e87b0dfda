"""parse_failure on the failure shapes each framework prints (snippets written for these tests, not gold text)."""

from __future__ import annotations

from bot.reading.frames import guess_module
from bot.reading.tracebacks import parse_failure

DEEPSPEED_OOM = """\
[2025-03-04 09:12:44,101] [INFO] [engine.py:1201:_configure_optimizer] Using DeepSpeed Optimizer param name adamw
Traceback (most recent call last):
  File "/home/ana/llm-sft/train_sft.py", line 141, in <module>
    main()
  File "/home/ana/llm-sft/train_sft.py", line 118, in main
    model_engine.backward(loss)
  File "/opt/conda/lib/python3.11/site-packages/deepspeed/utils/nvtx.py", line 18, in wrapped_fn
    ret_val = func(*args, **kwargs)
  File "/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 2020, in backward
    self.optimizer.backward(loss, retain_graph=self.retain_graph)
  File "/opt/conda/lib/python3.11/site-packages/torch/autograd/__init__.py", line 289, in backward
    _engine_run_backward(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 2 has a total capacity of 79.11 GiB
"""


def test_a_deepspeed_traceback_gives_its_frames_modules_frameworks_and_final_exception() -> None:
    failure = parse_failure(DEEPSPEED_OOM)
    assert failure.exception == "torch.OutOfMemoryError"
    assert failure.message is not None and failure.message.startswith("CUDA out of memory. Tried to allocate 3.50 GiB")
    assert [(f.module, f.function, f.line, f.framework) for f in failure.frames] == [
        ("train_sft", "<module>", 141, None), ("train_sft", "main", 118, None),
        ("deepspeed.utils.nvtx", "wrapped_fn", 18, "deepspeed"),
        ("deepspeed.runtime.engine", "backward", 2020, "deepspeed"),
        ("torch.autograd", "backward", 289, "torch")]
    deepest = failure.deepest_framework_frame
    assert deepest is not None and deepest.module == "torch.autograd"


def test_interleaved_rank_prefixed_tracebacks_keep_each_ranks_frames_apart() -> None:
    lines = []
    for rank in (5, 2):
        lines += [f"[rank{rank}]: Traceback (most recent call last):",
                  f'[rank{rank}]:   File "/workspace/run_clm.py", line 77, in <module>',
                  f"[rank{rank}]:     trainer.train()",
                  f'[rank{rank}]:   File "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", '
                  f"line 1938, in train",
                  f"[rank{rank}]:     return inner_training_loop(",
                  f"[rank{rank}]: RuntimeError: shape '[4, -1, 32, 128]' is invalid for input of size {rank}"]
    interleaved = [line for pair in zip(lines[:6], lines[6:], strict=True) for line in pair]
    failure = parse_failure("\n".join(interleaved))
    assert failure.exception == "RuntimeError" and failure.rank == 2
    assert [f.module for f in failure.frames] == ["run_clm", "transformers.trainer"]
    assert [f.framework for f in failure.frames] == [None, "transformers"]
    assert [r.rank for r in failure.raised] == [5, 2]


def test_srun_prefixed_megatron_traceback_with_timestamps_and_a_checkout_run_in_place() -> None:
    text = """\
0: 2025-01-20 17:03:09 Traceback (most recent call last):
0:   File "/workspace/Megatron-LM/pretrain_gpt.py", line 260, in <module>
0:     pretrain(
0:   File "/workspace/Megatron-LM/megatron/training/training.py", line 311, in pretrain
0:     model, optimizer, opt_param_scheduler = setup_model_and_optimizer(
0:   File "/workspace/Megatron-LM/megatron/core/tensor_parallel/layers.py", line 742, in __init__
0:     assert self.output_size % world_size == 0
0: AssertionError
srun: error: gpu-a17: task 0: Exited with exit code 1
"""
    failure = parse_failure(text)
    assert failure.exception == "AssertionError" and failure.message == ""
    assert [(f.module, f.framework) for f in failure.frames] == [
        ("pretrain_gpt", "megatron"), ("megatron.training.training", "megatron"),
        ("megatron.core.tensor_parallel.layers", "megatron")]
    assert failure.final is not None and failure.final.statement == "assert self.output_size % world_size == 0"
    assert failure.exit_code == 1 and failure.rank == 0 and failure.signal is None


def test_a_colossalai_traceback_quoted_in_markdown_with_its_indentation_lost() -> None:
    text = """\
> Traceback (most recent call last):
> File "/root/ColossalAI/applications/ColossalChat/train_sft.py", line 88, in train
> booster.boost(model, optimizer)
> File "/root/miniconda3/lib/python3.9/site-packages/colossalai/booster/booster.py", line 140, in boost
> model, optimizer, criterion, dataloader, lr_scheduler = self.plugin.configure(
> File "/root/miniconda3/lib/python3.9/site-packages/colossalai/booster/plugin/gemini_plugin.py", line 571, in configure
> optimizer = GeminiOptimizer(
> ValueError: GeminiPlugin only supports HybridAdam or CPUAdam, got AdamW
"""
    failure = parse_failure(text)
    assert failure.exception == "ValueError"
    assert failure.message == "GeminiPlugin only supports HybridAdam or CPUAdam, got AdamW"
    assert [(f.module, f.framework) for f in failure.frames] == [
        ("applications.ColossalChat.train_sft", "colossalai"), ("colossalai.booster.booster", "colossalai"),
        ("colossalai.booster.plugin.gemini_plugin", "colossalai")]


def test_chained_exceptions_end_in_the_last_one_with_the_causes_before_it() -> None:
    text = """\
Traceback (most recent call last):
  File "/usr/lib/python3.10/subprocess.py", line 526, in run
    raise CalledProcessError(retcode, process.args,
subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/kai/venv/lib/python3.10/site-packages/deepspeed/ops/op_builder/builder.py", line 508, in load
    return self.jit_load(verbose)
RuntimeError: Error building extension 'cpu_adam'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/kai/finetune.py", line 12, in <module>
    opt = DeepSpeedCPUAdam(params)
AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'
"""
    failure = parse_failure(text)
    assert [r.exception for r in failure.raised] == ["subprocess.CalledProcessError", "RuntimeError", "AttributeError"]
    assert failure.exception == "AttributeError"
    assert failure.message == "'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'"
    assert [f.module for f in failure.frames] == ["finetune"]
    assert failure.raised[0].frames[0].framework == "library"  # the standard library is not the user's code


RULE = "=" * 60
ELASTIC_SUMMARY = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n" + RULE + """
pretrain_llama.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2025-02-11_08:14:52
  host      : node-b07
  rank      : 6 (local_rank: 6)
  exitcode  : -15 (pid: 88231)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 88231
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-02-11_08:14:50
  host      : node-b07
  rank      : {rank} (local_rank: {rank})
  exitcode  : {code} (pid: 88227)
  error_file: <N/A>
  traceback : Signal {signal} ({name}) received by PID 88227
============================================================
"""


def test_an_elastic_child_failure_summary_names_the_root_cause_rank_exit_code_and_signal() -> None:
    killed = parse_failure(ELASTIC_SUMMARY.format(rank=3, code=-9, signal=9, name="SIGKILL"))
    assert (killed.rank, killed.exit_code, killed.signal) == (3, -9, "SIGKILL")
    assert killed.exception == "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
    crashed = parse_failure(ELASTIC_SUMMARY.format(rank=0, code=-11, signal=11, name="SIGSEGV"))
    assert (crashed.rank, crashed.exit_code, crashed.signal) == (0, -11, "SIGSEGV")


def test_the_ranks_own_error_is_the_failure_not_the_launchers_wrapper() -> None:
    rank_error = ('[rank4]: Traceback (most recent call last):\n'
                  '[rank4]:   File "/data/job/train.py", line 9, in <module>\n'
                  '[rank4]:     dist.barrier()\n'
                  '[rank4]: torch.distributed.DistBackendError: NCCL error in: '
                  '../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error\n'
                  'E0211 08:14:50.120000 140 torch/distributed/elastic/multiprocessing/api.py:833] failed '
                  '(exitcode: 1) local_rank: 4 (pid: 771) of binary: /usr/bin/python\n')
    failure = parse_failure(rank_error + ELASTIC_SUMMARY.format(rank=4, code=1, signal=0, name="-"))
    assert failure.exception == "torch.distributed.DistBackendError" and failure.rank == 4
    assert failure.exit_code == 1 and failure.signal == "SIGTERM"  # only the other rank's SIGTERM is named


def test_the_deepspeed_launcher_exit_line_gives_exit_code_signal_and_local_rank() -> None:
    text = ("[2025-04-02 11:00:01,532] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 90211\n"
            "[2025-04-02 11:00:01,533] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python3', '-u', "
            "'finetune.py', '--local_rank=5', '--deepspeed', 'ds_z3.json'] exits with return code = -11\n")
    failure = parse_failure(text)
    assert (failure.exit_code, failure.signal, failure.rank) == (-11, "SIGSEGV", 5)
    assert failure.exception is None and failure.frames == ()


def test_an_nccl_watchdog_timeout_names_its_rank_and_keeps_the_line() -> None:
    text = ("[rank1]:[E311 22:05:17.430211 3121 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=48213, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, "
            "Timeout(ms)=600000) ran for 600089 milliseconds before timing out.\n")
    failure = parse_failure(text)
    assert failure.rank == 1
    assert failure.error_lines and failure.error_lines[0].startswith("[Rank 1] Watchdog caught collective")


def test_a_cpp_terminate_gives_the_thrown_type_its_what_and_native_frames() -> None:
    text = """\
terminate called after throwing an instance of '{thrown}'
  what():  CUDA error: an illegal memory access was encountered

Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):
frame #0: {thrown}::Error(c10::SourceLocation, std::string) + 0x57 (0x7f01aa1b1897 in {venv}/torch/lib/libc10.so)
frame #1: <unknown function> + 0x1e5c2 (0x7f01aa27c5c2 in {venv}/deepspeed/ops/adam/fused_adam_op.so)
Aborted (core dumped)
""".format(venv="/opt/venv/lib/python3.10/site-packages", thrown="c10::Error")
    failure = parse_failure(text)
    assert failure.exception == "c10::Error"
    assert failure.message == "CUDA error: an illegal memory access was encountered"
    assert [f.framework for f in failure.frames] == ["torch", "deepspeed"]
    assert failure.signal == "SIGABRT"


def test_cuda_errors_import_errors_and_assertion_messages_are_the_final_exception() -> None:
    cases = {
        "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
        "reported at some other API call": ("RuntimeError", "CUDA error: device-side assert triggered"),
        "RuntimeError: CUDA error: no kernel image is available for execution on the device":
            ("RuntimeError", "CUDA error: no kernel image is available for execution on the device"),
        "ModuleNotFoundError: No module named 'apex.normalization'":
            ("ModuleNotFoundError", "No module named 'apex.normalization'"),
        "ImportError: /opt/venv/lib/python3.10/site-packages/transformer_engine_torch.cpython-310-x86_64-linux-"
        "gnu.so: undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs":
            ("ImportError", "/opt/venv/lib/python3.10/site-packages/transformer_engine_torch.cpython-310-x86_64-"
                            "linux-gnu.so: undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs"),
        "I set tp=4 and then get `AssertionError: num_attention_heads (30) must be a multiple of "
        "tensor_model_parallel_size (4)` right away":
            ("AssertionError", "num_attention_heads (30) must be a multiple of tensor_model_parallel_size (4)"),
    }
    for text, (exception, message) in cases.items():
        failure = parse_failure(text)
        assert (failure.exception, failure.message) == (exception, message), text


def test_build_failures_and_killed_processes_without_any_traceback() -> None:
    build = parse_failure("      |   ^~~~~~~~~~~~~~~~~~~\nninja: build stopped: subcommand failed.\n"
                          "error: command '/usr/local/cuda-12.4/bin/nvcc' failed with exit code 1\n")
    assert build.exception is None
    assert build.error_lines == ("ninja: build stopped: subcommand failed.",
                                 "error: command '/usr/local/cuda-12.4/bin/nvcc' failed with exit code 1")
    assert parse_failure("step 1200 loss 1.93\nKilled\n").signal == "SIGKILL"
    assert parse_failure("./run.sh: line 14: 30127 Segmentation fault      (core dumped) python gen.py").signal \
        == "SIGSEGV"
    assert parse_failure("srun: error: hpc-n12: task 3: Killed").rank == 3
    assert parse_failure("We aborted the run at step 40 and restarted it.").signal is None


def test_module_guesses_for_installed_checked_out_stdlib_and_user_paths() -> None:
    assert guess_module("C:\\Users\\li\\anaconda3\\Lib\\site-packages\\torch\\nn\\modules\\module.py") == \
        ("torch.nn.modules.module", "torch")
    assert guess_module("/usr/lib/python3/dist-packages/apex/optimizers/fused_adam.py") == \
        ("apex.optimizers.fused_adam", "library")
    assert guess_module("/opt/conda/lib/python3.11/threading.py") == ("threading", "library")
    assert guess_module("/src/DeepSpeed/deepspeed/runtime/zero/stage3.py") == ("deepspeed.runtime.zero.stage3",
                                                                              "deepspeed")
    assert guess_module("<frozen runpy>") == (None, "library")
    assert guess_module("scripts/my_train.py") == ("my_train", None)


def test_a_log_with_more_distinct_errors_than_kept_still_ends_in_its_last_one() -> None:
    warnings = "\n".join(f"ValueError: shard {i} of the dataloader was skipped" for i in range(80))
    failure = parse_failure(warnings + "\nTraceback (most recent call last):\n"
                            '  File "train.py", line 12, in <module>\n    engine.step()\n'
                            "RuntimeError: the optimizer step found no parameters to update\n")
    assert failure.exception == "RuntimeError"
    assert failure.message == "the optimizer step found no parameters to update"
    assert failure.frames and failure.frames[-1].function == "<module>"
