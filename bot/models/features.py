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

