"""Cheap text features for the linear predictor: error-signature flags that name a failure outright."""

from __future__ import annotations

import re

import numpy as np
from scipy import sparse

SIGNATURES: dict[str, str] = {
    "cuda_oom": r"cuda out of memory|outofmemoryerror|out of memory|\boom\b|cudaErrorMemoryAllocation",
    "host_oom": r"killed\b|oom-kill|signal 9|sigkill|exitcode\s*:?\s*-9",
    "nccl_timeout": r"watchdog caught collective operation timeout|collective operation timeout|"
                    r"timed? ?out|deadlock|\bhangs?\b|\bhanging\b|\bstuck\b",
    "nccl_error": r"nccl error|ncclSystemError|ncclInternalError|unhandled (?:system|cuda) error|ncclUnhandled",
    "undefined_symbol": r"undefined symbol",
    "build": r"\bninja\b|\bnvcc\b|error: command .*failed|building wheel|setup\.py|compil|CUDA_HOME|\bgcc\b",
    "import": r"no module named|importerror|modulenotfounderror|cannot import name",
    "segfault": r"segmentation fault|core dumped|sigsegv|sigabrt|signal 11|illegal instruction|\babort",
    "device": r"illegal memory access|device-side assert|invalid device|expected all tensors to be on the same "
              r"device|cudaError|CUDA error",
    "shape": r"size mismatch|shape mismatch|shapes? .* (?:do not|don't|cannot) match|must match the size|dtype",
    "checkpoint": r"checkpoint|state_dict|load_checkpoint|save_checkpoint|\.pt\b|safetensors|universal",
    "nan": r"\bnan\b|\binf\b|overflow|loss scale|diverge|not converg",
    "slow": r"\bslow|throughput|tflops|samples/s|tokens/s|speed|latency|faster",
    "memory": r"memory (?:usage|leak|increase|grows)|more memory|leak",
    "launch": r"hostfile|pdsh|\bssh\b|mpirun|torchrun|launcher|rendezvous|init_process_group|address already in use|"
              r"master_addr|master_port",
    "data": r"dataloader|dataset|sampler|data_path|indexed_dataset|tokeniz",
    "inference": r"inference|generate\(|kernel inject|fastgen|\bmii\b|serving",
    "question": r"\bhow (?:to|can|do)\b|\bis it possible\b|\bdoes .* support\b|\?\s*$",
    "feature": r"\bfeature\b|\bsupport for\b|\bplease add\b|\bwould be (?:nice|great)\b|\[feature",
    "docs": r"\bdocs?\b|documentation|tutorial|readme|typo|example",
    "pull_request": r"\bthis pr\b|\bfix(?:es|ed)? #\d+|\bthis (?:patch|change|commit)\b",
}
_COMPILED = {name: re.compile(pattern, re.IGNORECASE | re.MULTILINE) for name, pattern in SIGNATURES.items()}


def signature_flags(texts: list[str]) -> sparse.csr_matrix:
    """One 0/1 column per signature: does the text show it?"""
    rows = [[1.0 if rx.search(text) else 0.0 for rx in _COMPILED.values()] for text in texts]
    return sparse.csr_matrix(np.array(rows, dtype=np.float32).reshape(len(texts), len(_COMPILED)))


# Error-signature features beyond the flags: which kind of checkpoint, the final exception class, the
# component the traceback ends in. Fixed vocabularies, so a fitted model stores nothing for them.
ACTIVATION_CHECKPOINTING = re.compile(r"activation[ _-]?checkpoint|gradient[ _-]?checkpoint|checkpoint_activations|"
                                      r"recompute[_ ]?(?:granularity|activations|method)|checkpointing\.checkpoint\(",
                                      re.IGNORECASE)
MODEL_CHECKPOINT = re.compile(r"(?:save|load)_checkpoint|state_dict|dist_checkpointing|universal checkpoint|"
                              r"\.(?:pt|pth|bin|safetensors)\b|checkpoint (?:file|dir|conversion|loading|saving)|"
                              r"(?:save|load|resum)\w* (?:the |a |from )?checkpoint|ckpt", re.IGNORECASE)
EXCEPTIONS = ("RuntimeError", "AssertionError", "AttributeError", "TypeError", "IndexError", "ValueError",
              "KeyError", "ImportError", "ModuleNotFoundError", "CalledProcessError", "OutOfMemoryError",
              "DistBackendError", "FileNotFoundError", "NotImplementedError", "ChildFailedError")
EXCEPTION = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")
COMPONENTS: dict[str, str] = {  # the part of a framework a traceback frame is in, by path keywords
    "zero": r"/zero/|stage3|stage_1_and_2|partition_parameters|gemini",
    "pipeline": r"/pipe/|pipeline_parallel|/schedules",
    "inference": r"/inference/|module_inject|replace_module|fastgen|/mii/",
    "launcher": r"/launcher/|distributed/run\.py|/elastic/|torchrun|/cli/",
    "kernels": r"/ops/|/csrc/|fused_kernels|cpp_extension|/kernel/|op_builder",
    "data": r"/data/|/datasets/|tokenizer|dataloader",
    "checkpointing": r"dist_checkpointing|/checkpoint/|checkpointing\.py|_checkpoint\.py",
    "optimizer": r"optimizer|bf16_optimizer|fp16/",
    "communication": r"distributed_c10d|/comm/|parallel_state|nccl",
    "model": r"/models?/|/transformer/|/layers?/|/nn/",
}
_COMPONENTS = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in COMPONENTS.items()}
FRAME = re.compile(r'File "([^"]+)"|(?:^|\s)((?:/[\w.-]+)+\.py)\b', re.MULTILINE)


def final_exception(text: str) -> str | None:
    """The last exception class named in the text (the one the run died with, in a pasted traceback)."""
    found = EXCEPTION.findall(text)
    return found[-1] if found else None


def failing_component(text: str) -> str | None:
    """The component of the last traceback frame (file path) that matches one; None without frames."""
    for match in reversed(FRAME.findall(text)):
        path = match[0] or match[1]
        for name, rx in _COMPONENTS.items():
            if rx.search(path):
                return name
    return None


def error_signature(texts: list[str]) -> sparse.csr_matrix:
    """Activation vs model checkpointing, one-hot final exception class, one-hot failing component."""
    columns = 2 + len(EXCEPTIONS) + 1 + len(COMPONENTS)
    rows = np.zeros((len(texts), columns), dtype=np.float32)
    components = list(COMPONENTS)
    for i, text in enumerate(texts):
        activation = ACTIVATION_CHECKPOINTING.search(text) is not None
        rows[i, 0] = activation
        rows[i, 1] = MODEL_CHECKPOINT.search(ACTIVATION_CHECKPOINTING.sub(" ", text)) is not None
        exception = final_exception(text)
        if exception is not None:
            rows[i, 2 + (EXCEPTIONS.index(exception) if exception in EXCEPTIONS else len(EXCEPTIONS))] = 1.0
        component = failing_component(text)
        if component is not None:
            rows[i, 3 + len(EXCEPTIONS) + components.index(component)] = 1.0
    return sparse.csr_matrix(rows)
