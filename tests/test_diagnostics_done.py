"""Next steps that read the post (issue #21): an entry's optional `done_when` recognises a post that shows its
next step already done, and its `follow_up` is shown instead, or nothing. Texts written for these tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.core.errors import ConfigError
from bot.knowledge import clauses
from bot.knowledge.diagnostics import diagnose, load_diagnostics, load_diagnostics_file

# entry: (a post that shows the step done, a near miss that does not, the framework); the done post gets the
# entry's follow-up, or silence when it has none
DONE: dict[str, tuple[tuple[str, str], tuple[str, str], str | None]] = {
    "megatron_loss_spike_after_resume": (
        ("Loss jumps after resuming from a checkpoint", "The loss was 2.1 at iteration 500; after resuming it jumps to "
         "9. With --no-load-optim the resumed run continues normally."),
        ("Loss jumps after resuming from a checkpoint", "The loss was 2.1 at iteration 500; after resuming it jumps to "
         "9. I resume with --load ckpt and --no-load-optim."),
        "Megatron-LM"),
    "deepspeed_kernel_inject_wrong_output": (
        ("Wrong outputs with init_inference", "With replace_with_kernel_inject=True the generations are gibberish; "
         "setting replace_with_kernel_inject=False produces correct output."),
        ("Wrong outputs with init_inference", "With replace_with_kernel_inject=True the generations are gibberish."),
        "DeepSpeed"),
    "device_side_assert": (
        ("Embedding lookup fails", "RuntimeError: CUDA error: device-side assert triggered\nI re-ran with "
         "CUDA_LAUNCH_BLOCKING=1 and the traceback now stops in the embedding."),
        ("Embedding lookup fails", "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might "
         "be asynchronously reported. For debugging consider passing CUDA_LAUNCH_BLOCKING=1."), None),
    "illegal_memory_access": (
        ("Crash in fused attention", "```\nCUDA_LAUNCH_BLOCKING=1 deepspeed train.py\n```\nRuntimeError: CUDA "
         "error: an illegal memory access was encountered"),
        ("Crash in fused attention", "RuntimeError: CUDA error: an illegal memory access was encountered"), None),
    "hang_reported": (
        ("Training hangs after eval", "Every rank is stuck in `dist.all_gather()` right after evaluation."),
        ("Training hangs after eval", "Every rank stops printing right after evaluation; GPUs at 100%."), None),
    "deepspeed_multi_gpu_inference_howto": (
        ("How to run CodeGen inference on multiple GPUs with tensor parallelism?", "AutoTP does not support the "
         "CodeGen model; why, and can I add it myself?"),
        ("How to run CodeGen inference on multiple GPUs with tensor parallelism?", "The model does not fit on one "
         "GPU."), "DeepSpeed"),
    "nccl_watchdog_timeout": (
        ("NCCL timeout at step 5000", "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, "
         "OpType=ALLREDUCE)\npy-spy dump on rank 3:\nThread 4242 (active): \"MainThread\""),
        ("NCCL timeout at step 5000", "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, "
         "OpType=ALLREDUCE)"), None),
    "segmentation_fault": (
        ("Segfault in the optimizer", "Segmentation fault (core dumped)\nWith faulthandler:\nCurrent thread "
         "0x00007f3a (most recent call first):\n  File \"adam.py\", line 12 in step"),
        ("Segfault in the optimizer", "Segmentation fault (core dumped) right at the first optimizer step."), None),
    "sigkill_host_oom": (
        ("Process killed while loading", "exitcode: -9\ndmesg: Out of memory: Killed process 5150 (python)"),
        ("Process killed while loading", "The launcher says exitcode: -9 after five minutes."), None),
    "nccl_system_error": (
        ("NCCL error at init", "ncclSystemError: unhandled system error\nNCCL WARN socketStartConnect: Connect to "
         "10.0.0.2<4301> failed"),
        ("NCCL error at init", "ncclSystemError: unhandled system error on every rank."), None),
    "address_in_use": (
        ("Address already in use at init", "I made sure the port 29500 is free before starting.\nRuntimeError: "
         "The server socket has failed to listen on any local network address. Address already in use"),
        ("Address already in use at init", "RuntimeError: The server socket has failed to listen on any local "
         "network address. Address already in use"), None),
    "colossalai_run_failed": (
        ("colossalai run fails on two nodes", "torchrun works fine on each node by itself.\nError: failed to run "
         "torchrun --nproc_per_node=8 --nnodes=2 train.py on node-2"),
        ("colossalai run fails on two nodes", "Error: failed to run torchrun --nproc_per_node=8 --nnodes=2 train.py "
         "on node-2"), "Colossal-AI"),
    "megatron_dataset_prefix_not_found": (
        ("Pretraining cannot find the data", "--data-path /mnt/corpus/wiki_text_document\nDataset does not exist: "
         "/mnt/corpus/wiki_text_document (the files are on a local disk of node 0)"),
        ("Pretraining cannot find the data", "--data-path /mnt/corpus/wiki\nDataset does not exist: /mnt/corpus/wiki"),
        "Megatron-LM"),
    "megatron_dataset_index_build_slow": (
        ("Stuck before training starts", "It is stuck at > building train, validation, and test datasets ...; with "
         "--mock-data the same job reaches iteration 10 in a minute."),
        ("Stuck before training starts", "It is stuck at > building train, validation, and test datasets ... for "
         "an hour; GPUs idle."), "Megatron-LM"),
    "deepspeed_grad_accumulation_changes_loss": (
        ("Higher loss with accumulation", "With bf16 and ZeRO-1 I enabled FP32 gradient accumulation; the loss is "
         "stable now but higher with gradient accumulation 8 than with micro batch 8 and no accumulation."),
        ("Higher loss with accumulation", "With bf16 and ZeRO-1 the loss is higher with gradient accumulation 8 "
         "than with micro batch 8 and no accumulation, without fp32 gradient accumulation. Should I use fp32 "
         "gradient accumulation?"), "DeepSpeed"),
    "inplace_modified_for_backward": (
        ("Backward fails in my block", "RuntimeError: one of the variables needed for gradient computation has been "
         "modified by an inplace operation: [torch.cuda.FloatTensor [8, 64]]\nWith anomaly detection on: Error "
         "detected in MulBackward0. Traceback of forward call that caused the error:\n  File \"block.py\", line 9"),
        ("Backward fails in my block", "RuntimeError: one of the variables needed for gradient computation has been "
         "modified by an inplace operation: [torch.cuda.FloatTensor [8, 64]]. Hint: enable anomaly detection to find "
         "the operation that failed to compute its gradient"), None),
    "loss_differs_between_parallel_settings": (
        ("Inconsistent loss between ZeRO-2 and ZeRO-3", "The loss is different with ZeRO-3 than with ZeRO-2 after "
         "200 steps.\nThe first two steps are identical in both runs."),
        ("Inconsistent loss between ZeRO-2 and ZeRO-3", "The loss is different with ZeRO-3 than with ZeRO-2 after "
         "200 steps."), "DeepSpeed"),
    "zero3_not_partitioning": (
        ("ZeRO-3 loads the full model on every GPU", "With ZeRO-3 the weights are not partitioned: every GPU holds the "
         "whole model.\nmodel = AutoModelForCausalLM.from_pretrained(name, quantization_config=BitsAndBytesConfig("
         "load_in_4bit=True))"),
        ("ZeRO-3 loads the full model on every GPU", "With ZeRO-3 the weights are not partitioned: every GPU holds the "
         "whole model.\nmodel = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)"),
        "DeepSpeed"),
    "deepspeed_engine_not_freed": (
        ("GPU memory not freed", "After training I call engine.destroy(), del engine and gc.collect(), but the GPU "
         "memory is not freed after deleting the engine."),
        ("GPU memory not freed", "GPU memory is not freed after deleting the engine with del engine."), "DeepSpeed"),
    "optimizer_empty_parameter_list": (
        ("Pipeline: empty parameter list", "Only GPU0 has trainable parameters, the rest is frozen.\nValueError: "
         "optimizer got an empty parameter list"),
        ("Pipeline: empty parameter list", "Most of the model is frozen.\nValueError: optimizer got an empty "
         "parameter list"), "DeepSpeed"),
    # steps without a follow-up: a post that took them gets silence
    "ssh_connection_refused": (
        ("Multi-node launch fails", "deepspeed --hostfile hostfile --ssh_port 2222 train.py\nnode-b: ssh: connect to "
         "host node-b port 2222: Connection refused\npdsh@node-a: node-b: ssh exited with exit code 255"),
        ("Multi-node launch fails", "deepspeed --hostfile hostfile train.py\nnode-b: ssh: connect to host node-b "
         "port 22: Connection refused\npdsh@node-a: node-b: ssh exited with exit code 255"), "DeepSpeed"),
    "deepspeed_mpi_or_slurm_launch": (
        ("How to run DeepSpeed on SLURM?", "I use deepspeed --launcher slurm --hostfile hostfile train.py; is that the "
         "recommended way?"),
        ("How to run DeepSpeed on SLURM?", "I use deepspeed --hostfile hostfile train.py; is that the recommended "
         "way?"), "DeepSpeed"),
    "deepspeed_autotp_training_howto": (
        ("How to train with AutoTP?", "I set \"tensor_parallel\": {\"autotp_size\": 4} and ZeRO-2; is the dataloader "
         "supposed to be sharded by DP rank?"),
        ("How to train with AutoTP?", "We use ZeRO-2; is the dataloader supposed to be sharded by DP rank?"),
        "DeepSpeed"),
    "deepspeed_pipeline_variable_length": (
        ("Pipeline throughput", "We build PipelineModule(layers, num_stages=4, dynamic_shape=True) and batches have "
         "variable sequence lengths; throughput drops."),
        ("Pipeline throughput", "We build PipelineModule(layers, num_stages=4) and batches have variable sequence "
         "lengths; throughput drops."), "DeepSpeed"),
    "colossalai_checkpoint_to_hf": (
        ("How to convert a booster checkpoint to a Hugging Face checkpoint?", "I save with booster.save_model(model, "
         "\"ckpt\", shard=True); which tokenizer files should go beside it?"),
        ("How to convert a booster checkpoint to a Hugging Face checkpoint?", "I save with booster.save_model(model, "
         "\"ckpt\"); which tokenizer files should go beside it?"), "Colossal-AI"),
    "deepspeed_ulysses_hf_howto": (
        ("How to use Ulysses with transformers?", "I call UlyssesSPAttentionHF.register_with_transformers before "
         "from_pretrained; do I still need a DistributedSampler?"),
        ("How to use Ulysses with transformers?", "Do I still need a DistributedSampler?"), "DeepSpeed"),
    "deepspeed_nvme_aio_failed": (
        ("NVMe offload fails for 13B", "Smaller models offload fine to the same /local_nvme folder.\nAssertionError: "
         "buffer nbytes != file bytes 57648000 != 57647104"),
        ("NVMe offload fails for 13B", "We offload to /local_nvme.\nAssertionError: buffer nbytes != file bytes "
         "57648000 != 57647104"), "DeepSpeed"),
    "colossalai_multinode_setup": (
        ("How to launch Colossal-AI training on two nodes?", "I use colossalai run --host node1,node2 --nproc_per_node "
         "8 train.py; should the nodes share a file system?"),
        ("How to launch Colossal-AI training on two nodes?", "colossalai run --nproc_per_node 8 train.py works on "
         "one; should the nodes share a file system?"), "Colossal-AI"),
    "deepspeed_offload_not_taking_effect": (
        ("Offload does not reduce GPU memory", "With offload_param to cpu the GPU memory is still very high.\n"
         "[INFO] [utils.py:791:see_memory_usage] MA 0.58 GB         Max_MA 26.38 GB         CA 26.7 GB"),
        ("Offload does not reduce GPU memory", "With offload_param to cpu the GPU memory is still very high in "
         "nvidia-smi."), "DeepSpeed"),
    "first_gpu_more_memory": (
        ("GPU memory imbalance with ZeRO-2", "GPU 1 uses 20 GB more memory than GPU 0:\n|  0  A100-SXM4-80GB |  "
         "43591MiB / 81920MiB |\n|  1  A100-SXM4-80GB |  77117MiB / 81920MiB |"),
        ("GPU memory imbalance with ZeRO-2", "GPU 1 uses 20 GB more memory than GPU 0 during training."), None),
    "zero3_init_loading_pretrained": (
        ("How to load pretrained weights into a model built in zero.Init", "I build it inside zero.Init and load "
         "under deepspeed.zero.GatheredParameters(params, modifier_rank=0), yet rank 1 sees zeros."),
        ("How to load pretrained weights into a model built in zero.Init", "load_state_dict fails with size "
         "mismatch."), "DeepSpeed"),
    "megatron_dataset_index_not_shared": (
        ("Dataset indices are not built on the other nodes", "Each node has its own local disk, no NFS, so rank 8 "
         "fails with FileNotFoundError: [Errno 2] No such file or directory: '/data/c_text_document_doc_idx.npy'"),
        ("Dataset indices are not built on the other nodes", "Rank 8 fails with FileNotFoundError: [Errno 2] No "
         "such file or directory: '/data/c_text_document_doc_idx.npy'"), "Megatron-LM"),
    "pipeline_first_stage_more_memory": (
        ("Unbalanced memory across pipeline stages", "PP=4 with --recompute-granularity full --recompute-method "
         "uniform: the first stage uses 70 GB and the last 30 GB; memory is unbalanced."),
        ("Unbalanced memory across pipeline stages", "PP=4 with --recompute-activations: the first stage uses 70 GB "
         "and the last 30 GB; memory is unbalanced."), "Megatron-LM"),
}


@pytest.mark.parametrize("entry_id", sorted(DONE))
def test_a_post_that_did_the_step_gets_the_follow_up_and_one_that_did_not_the_step(entry_id: str) -> None:
    (title, body), (near_title, near_body), framework = DONE[entry_id]
    entry = load_diagnostics().entry(entry_id)
    own = entry.by_framework.get(framework or "")
    shown = {d.id: d for d in diagnose(title, body, framework=framework, kind="bug_report")}
    raw = (own and own.follow_up) or entry.follow_up
    follow_up = raw and clauses.render(raw, framework, None)
    assert shown[entry_id].done and shown[entry_id].follow_up == follow_up
    near = {d.id: d for d in diagnose(near_title, near_body, framework=framework, kind="bug_report")}
    next_step = clauses.render((own and own.next_step) or entry.next_step, framework, None)
    assert not near[entry_id].done and near[entry_id].next_step == next_step


# entry: a question that already uses the documented answer (marked done, no follow-up: the comment stays silent)
ANSWER_IN_USE = {
    "megatron_finetune_from_checkpoint": (
        "How to fine-tune from a pretrained checkpoint?",
        "I already use --load ckpt --finetune; should the learning rate warmup be shorter?", "Megatron-LM"),
    "megatron_blend_datasets_howto": (
        "How to train with multiple datasets?",
        "I use --data-path 0.5 /data/a_text_document 0.5 /data/b_text_document; is the split applied per dataset?",
        "Megatron-LM"),
    "deepspeed_multi_gpu_inference_howto": (
        "How to run inference on 4 GPUs",
        "engine = deepspeed.init_inference(model, tensor_parallel={\"tp_size\": 4}, dtype=torch.half) runs; how do I "
        "stream the tokens?", "DeepSpeed"),
    "deepspeed_memory_above_expected": (
        "ZeRO-3 uses more GPU memory than expected",
        "estimate_zero3_model_states_mem_needs_all_live says 9 GB per GPU, but after deepspeed.initialize each GPU "
        "already holds 14.6 GB.", "DeepSpeed"),
    "deepspeed_memory_estimate_howto": (
        "How much GPU memory do I need to train with ZeRO-3?",
        "estimate_zero3_model_states_mem_needs_all_live prints 18GB per GPU for our model; how do I add the "
        "activations?", "DeepSpeed"),
    "megatron_core_to_hf_export": (
        "How to convert a Megatron-LM checkpoint to Hugging Face format?",
        "bridge.export_ckpt(megatron_path, hf_path) runs with Megatron Bridge; does it copy the tokenizer too?",
        "Megatron-LM"),
}


@pytest.mark.parametrize("entry_id", sorted(ANSWER_IN_USE))
def test_a_question_already_using_the_answer_is_marked_done_with_nothing_to_add(entry_id: str) -> None:
    title, body, framework = ANSWER_IN_USE[entry_id]
    shown = {d.id: d for d in diagnose(title, body, framework=framework, kind="usage_question")}
    assert shown[entry_id].done and load_diagnostics().entry(entry_id).follow_up is None
    fresh = {d.id: d for d in diagnose(title, "", framework=framework, kind="usage_question")}
    assert not fresh[entry_id].done


@pytest.mark.parametrize("body", [
    "With replace_with_kernel_inject=True the output is gibberish; with replace_with_kernel_inject=False it is the "
    "same gibberish.",
    "With replace_with_kernel_inject=True the output is wrong; replace_with_kernel_inject=False still doesn't work.",
    "With replace_with_kernel_inject=True the output is wrong. Without kernel injection it is not correct either.",
])
def test_a_post_that_says_the_comparison_failed_too_is_not_read_as_done(body: str) -> None:
    [found] = diagnose("Wrong outputs with init_inference", body, framework="DeepSpeed", kind="bug_report")
    assert found.id == "deepspeed_kernel_inject_wrong_output" and not found.done


def test_follow_ups_are_one_line_and_differ_from_the_step_they_follow() -> None:
    with_follow_up = [e for e in load_diagnostics().entries if e.follow_up]
    assert len({e.id for e in with_follow_up} & set(DONE)) >= 12  # most entries read as done have a follow-up
    assert all(e.follow_up != e.next_step and "\n" not in (e.follow_up or "") for e in with_follow_up)


def test_a_follow_up_without_done_when_is_refused_naming_the_entry(tmp_path: Path) -> None:
    entry = {"id": "made_up", "title": "Made up", "patterns": ["made up error"], "symptoms": ["api_exception"],
             "reading": "A reading.", "next_step": "A step.", "follow_up": "The step after."}
    path = tmp_path / "diagnostics.yaml"
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [entry]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"entry 'made_up' \(entries\[0\]\).*`follow_up` needs `done_when`"):
        load_diagnostics_file(path)
    path.write_text(yaml.safe_dump({"version": "t", "taxonomy": "ddl-v1", "entries": [
        {**entry, "done_when": ["made up (fix|workaround) applied"]}]}), encoding="utf-8")
    assert load_diagnostics_file(path).entry("made_up").follow_up == "The step after."


@pytest.mark.parametrize(("body", "done"), [
    ("The first two steps are identical in both runs.", True),
    ("The initial loss matches (10.83 in both).", True),
    ("Step 0 loss is identical in the two runs.", True),
    ("The first step losses are not the same either.", False),
    ("The loss is not the same even at the first step.", False),
    ("The first 10 steps don't match.", False),
])
def test_the_loss_comparison_reads_first_steps_equal_and_not_their_negation(body: str, done: bool) -> None:
    title = "Inconsistent loss between ZeRO-2 and ZeRO-3"
    text = "The loss is different with ZeRO-3 than with ZeRO-2 after 200 steps.\n" + body
    found = {d.id: d for d in diagnose(title, text, framework="DeepSpeed", kind="bug_report")}
    assert found["loss_differs_between_parallel_settings"].done is done
