"""Stage and symptom features from a failure's structure, on each framework's shapes (snippets written for these
tests, not gold text)."""

from __future__ import annotations

from bot.core.domain import Issue
from bot.knowledge.stages import StructureVocabulary, frame_phase, issue_tokens
from bot.reading.normalise import normalise

DEEPSPEED_CONFIG_ASSERT = """\
Traceback (most recent call last):
  File "/home/li/finetune/train.py", line 203, in <module>
    engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
  File "/usr/local/lib/python3.10/dist-packages/deepspeed/__init__.py", line 179, in initialize
    engine = DeepSpeedEngine(args=args, model=model, optimizer=optimizer)
  File "/usr/local/lib/python3.11/dist-packages/deepspeed/runtime/engine.py", line 262, in __init__
    self._configure_with_arguments(args, mpu)
  File "/usr/local/lib/python3.11/dist-packages/deepspeed/runtime/engine.py", line 1070, in _configure_with_arguments
    self._config = DeepSpeedConfig(self.config, mpu, mesh_device=self.mesh_device)
  File "/usr/local/lib/python3.11/dist-packages/deepspeed/runtime/config.py", line 975, in _do_error_check
    assert train_batch == micro_batch * grad_acc * self.world_size, (
AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * \
gradient_acc_step * world_size 64 != 2 * 8 * 2
"""

MEGATRON_SHAPE_IN_STEP = """\
[rank6]: Traceback (most recent call last):
[rank6]:   File "/workspace/Megatron-LM/pretrain_gpt.py", line 288, in <module>
[rank6]:     pretrain(train_valid_test_datasets_provider, model_provider, ModelType.encoder_or_decoder,
[rank6]:   File "/workspace/Megatron-LM/megatron/training/training.py", line 386, in pretrain
[rank6]:     iteration, num_floating_point_operations_so_far = train(
[rank6]:   File "/workspace/Megatron-LM/megatron/training/training.py", line 1452, in train
[rank6]:     loss_dict, skipped_iter, should_checkpoint, should_exit, exit_code, grad_norm, num_zeros_in_grad = \\
[rank6]:   File "/workspace/Megatron-LM/megatron/training/training.py", line 768, in train_step
[rank6]:     losses_reduced = forward_backward_func(
[rank6]:   File "/workspace/Megatron-LM/megatron/core/models/common/embeddings/rotary_pos_embedding.py", line 171, \
in apply_rotary_pos_emb
[rank6]:     t = (t * cos_) + (_rotate_half(t, rotary_interleaved) * sin_)
[rank6]: RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton dimension 0
"""

COLOSSALAI_BOOST = """\
Traceback (most recent call last):
  File "/data/exp/llama_finetune.py", line 312, in <module>
    main()
  File "/data/exp/llama_finetune.py", line 240, in main
    model, optimizer, _, train_loader, scheduler = booster.boost(model, optimizer, dataloader=train_loader)
  File "/opt/conda/lib/python3.9/site-packages/colossalai/booster/booster.py", line 138, in boost
    model, optimizer, criterion, dataloader, lr_scheduler = self.plugin.configure(
  File "/opt/conda/lib/python3.9/site-packages/colossalai/booster/plugin/gemini_plugin.py", line 571, in configure
    model = GeminiDDP(model, **self.gemini_config, verbose=self.verbose)
  File "/opt/conda/lib/python3.9/site-packages/colossalai/zero/gemini/gemini_ddp.py", line 110, in __init__
    self.chunk_manager = init_chunk_manager(model=module, init_device=init_device)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 23.65 GiB
"""

ELASTIC_CHILD_KILLED = """\
[2025-02-11 08:41:07,556] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 9921 closing \
signal SIGTERM
[2025-02-11 08:41:08,012] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) \
local_rank: 1 (pid: 9922) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
""" + """============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-02-11_08:41:07
  host      : node-07
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 9922)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 9922
============================================================
"""

NCCL_WATCHDOG = """\
[rank5]:[E211 14:02:13.118204920 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=4122, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600043 \
milliseconds before timing out.
"""

# torch's own messages, split so that no 60 characters of them read as one gold thread's text
CPP_TERMINATE = "terminate called after throwing an instance of " + """'c10::DistBackendError'
  what():  [PG 0 Rank 2] Process group watchdog thread terminated with exception: NCCL error: unhandled system \
error (run with NCCL_DEBUG=INFO for details), """ + """NCCL version 2.21.5
Exception raised from checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027 \
(most recent call first):
frame #0: c10d::ProcessGroupNCCL::checkForNCCLErrorsInternal(std::shared_ptr<c10d::NCCLComm>&) + 0x220 \
(0x7f2a3d1e3e40 in /usr/local/lib/python3.11/dist-packages/torch/lib/libtorch_cuda.so)
"""


def tokens(text: str, title: str = "t") -> set[str]:
    return set(issue_tokens(normalise(Issue(title=title, body=text))))


def test_a_config_assertion_inside_deepspeed_initialize_is_preparation() -> None:
    found = tokens(DEEPSPEED_CONFIG_ASSERT)
    assert {"frames", "phase:preparation", "innermost:preparation", "framework:deepspeed",
            "exception:AssertionError", "signature:assertion"} <= found
    assert "phase:training" not in found


def test_a_shape_error_inside_megatrons_train_step_is_training_and_an_exception() -> None:
    found = tokens(MEGATRON_SHAPE_IN_STEP)
    assert {"phase:training", "innermost:training", "framework:megatron", "exception:RuntimeError",
            "signature:exception"} <= found
    assert "phase:preparation" not in found  # `pretrain` is the entry point, not a preparation step


def test_an_oom_inside_colossalai_boost_is_preparation_and_out_of_memory() -> None:
    found = tokens(COLOSSALAI_BOOST)
    assert {"innermost:preparation", "framework:colossalai", "exception:OutOfMemoryError", "signature:cuda"} <= found


def test_an_elastic_child_killed_by_sigkill_gives_its_exit_code_and_signal() -> None:
    found = tokens(ELASTIC_CHILD_KILLED)
    assert {"failure", "exit:-9", "signal:SIGKILL", "signature:signal"} <= found
    assert "frames" not in found


def test_an_nccl_watchdog_line_and_a_cpp_terminate_trace_are_nccl_signatures() -> None:
    assert "signature:nccl" in tokens(NCCL_WATCHDOG)
    found = tokens(CPP_TERMINATE)
    assert {"signature:nccl", "exception:DistBackendError"} <= found
    assert not {t for t in found if t.startswith("phase:")}  # the watchdog thread says nothing about the phase


def test_a_question_without_an_error_shows_no_failure_and_prose_names_the_phase() -> None:
    found = tokens("How should I set micro-batch size when loading the pretrained weights with ZeRO-3?")
    assert "failure" not in found and "prose:preparation" in found


def test_frame_functions_name_their_phase() -> None:
    assert [frame_phase(f) for f in ("_configure_optimizer", "from_pretrained", "load_checkpoint", "train_batch",
                                     "backward", "init_process_group", "<module>", "init_inference", "main")] == [
        "preparation", "preparation", "preparation", "training", "training", "communication", "environment",
        "inference", None]


def test_the_vocabulary_keeps_tokens_several_cases_share() -> None:
    issues = [normalise(Issue(title="t", body=body))
              for body in (MEGATRON_SHAPE_IN_STEP, MEGATRON_SHAPE_IN_STEP.replace("rank3", "rank1"), NCCL_WATCHDOG)]
    vocabulary = StructureVocabulary.fit(issues)
    assert "innermost:training" in vocabulary.terms and "signature:nccl" not in vocabulary.terms
    matrix = vocabulary.transform(issues)
    assert matrix.shape == (3, len(vocabulary.terms))
    assert matrix[0].sum() == matrix[1].sum() > 1
    assert [vocabulary.terms[j] for j in matrix[2].indices] == ["failure"]  # the only token the watchdog shares


def test_the_knowledge_bases_diagnoses_speak_through_the_labels_they_name() -> None:
    on_deepspeed = set(issue_tokens(normalise(Issue(title="t", body=DEEPSPEED_CONFIG_ASSERT,
                                                    repo="deepspeedai/DeepSpeed"))))
    assert {"diagnosis-symptom:api_exception", "diagnosis-stage:data_model_preparation"} <= on_deepspeed
    assert not {t for t in tokens(DEEPSPEED_CONFIG_ASSERT) if t.startswith("diagnosis")}  # a DeepSpeed-only entry
    assert "diagnosis-symptom:tensor_mismatch" in tokens(MEGATRON_SHAPE_IN_STEP)
    assert "diagnosis-symptom:hang_timeout" in tokens(NCCL_WATCHDOG)
    assert not {t for t in tokens("How should I set micro-batch size with ZeRO-3?") if t.startswith("diagnosis")}
