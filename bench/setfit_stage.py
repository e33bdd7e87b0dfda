"""A SetFit-style contrastive fine-tune of the embedding, tried for issue #16 on the stage axis (and scored on
symptom and kind too), on one repetition of the task's grouped folds.

Per fold: the packaged sentence-transformers model is fine-tuned on the fold's training part with pairs built on
one axis (`--axis stage` by default; per record, `--pairs` / 2 partners with the same label and as many with
another, cosine-similarity loss as SetFit uses, one epoch), written with a plain PyTorch loop so that nothing is
installed beyond the package's own dependencies. Both models then embed the fold's training and test texts, and
the embedding view (a balanced logistic regression per axis, as in `linear-fused`) is fitted on each. Scored: the
embedding view alone (bare vs fine-tuned), and the default's fusion with its embedding view replaced by the
fine-tuned one (the other views from `bench/label_views.py`'s fold cache). Printed with the fine-tune's wall time
per fold (the issue's budget: 10 minutes on 2 cores for the shipped model).

    python bench/setfit_stage.py [--axis stage] [--pairs 4] [--folds-cache FILE.json] [--max-seq 128]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from label_boundaries import fused
from label_views import cached_folds, decode, samples_of, score, task_splits
from sentence_transformers import SentenceTransformer
from sklearn.linear_model import LogisticRegression

from bot.models.embedding import resolve_model_path
from bot.models.engine import build_training_set
from bot.models.joint import JOINT_AXES
from bot.reading.normalise import normalise
from eval.jobs import make_embedder


def pairs_of(labels: list[str | None], per_record: int, rng: random.Random) -> list[tuple[int, int, float]]:
    """Per labelled record, per_record / 2 partners with its label (1.0) and as many with another (0.0)."""
    by_label: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        if label is not None:
            by_label.setdefault(label, []).append(i)
    everyone = [i for i, label in enumerate(labels) if label is not None]
    out = []
    for i in everyone:
        same = [j for j in by_label[labels[i]] if j != i]  # type: ignore[index]
        other = [j for j in everyone if labels[j] != labels[i]]
        for _ in range(per_record // 2):
            if same:
                out.append((i, rng.choice(same), 1.0))
            if other:
                out.append((i, rng.choice(other), 0.0))
    rng.shuffle(out)
    return out


def fine_tune(model_id: str, texts: list[str], labels: list[str | None], per_record: int, max_seq: int, seed: int
              ) -> SentenceTransformer:
    torch.manual_seed(seed)
    model = SentenceTransformer(resolve_model_path(model_id), device="cpu")
    model.max_seq_length = max_seq
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    pairs = pairs_of(labels, per_record, random.Random(seed))
    model.train()
    for start in range(0, len(pairs), 16):
        batch = pairs[start:start + 16]
        left = model(model.tokenize([texts[i] for i, _, _ in batch]))["sentence_embedding"]
        right = model(model.tokenize([texts[j] for _, j, _ in batch]))["sentence_embedding"]
        target = torch.tensor([y for _, _, y in batch])
        loss = torch.nn.functional.mse_loss(torch.cosine_similarity(left, right), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return model


def embedding_view(train: np.ndarray, test: np.ndarray, training: Any) -> dict[str, list[dict[str, float]]]:
    out = {}
    for axis in JOINT_AXES:
        rows, labels = training.rows(axis)
        model = LogisticRegression(C=2.0, max_iter=3000, class_weight="balanced").fit(train[rows], labels)
        every = training.taxonomy.predictable(axis)
        out[axis] = [{lab: float(dict(zip(model.classes_, p, strict=True)).get(lab, 0.0)) for lab in every}
                     for p in model.predict_proba(test)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="ddl-dev-cv")
    parser.add_argument("--axis", default="stage")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--max-seq", type=int, default=128)
    parser.add_argument("--folds-cache", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    args.stacking = False
    torch.set_num_threads(2)
    settings, taxonomy, splits = task_splits(args.task, 1)
    folds = cached_folds(args, splits, settings)[:len(splits)]  # a cache of more repetitions starts with these
    embedder = make_embedder(settings)
    bare_views, tuned_views, seconds = [], [], []
    for split in splits:
        training, _ = build_training_set(split.train, taxonomy, embedder, settings.use_silver)
        test_texts = [normalise(c).text for c in split.test]
        started = time.monotonic()
        model = fine_tune(settings.embedding_model, training.texts, training.targets[args.axis], args.pairs,
                          args.max_seq, settings.seed)
        seconds.append(time.monotonic() - started)
        tuned_train = model.encode(training.texts, normalize_embeddings=True, batch_size=32)
        tuned_test = model.encode(test_texts, normalize_embeddings=True, batch_size=32)
        bare_views.append(embedding_view(training.index.vectors, embedder.embed(test_texts), training))
        tuned_views.append(embedding_view(tuned_train, tuned_test, training))
        print(f"fold {len(seconds)}: fine-tune {seconds[-1]:.0f} s", flush=True)
    baseline = samples_of(folds, [decode(f, (), None, 0.0, ()) for f in folds])
    variants = {
        "embedding view alone, bare model": [{a: v[a] for a in JOINT_AXES} for v in bare_views],
        "embedding view alone, fine-tuned": [{a: v[a] for a in JOINT_AXES} for v in tuned_views],
        "default": [{a: [fused(f, a, r) for r in range(len(f["ids"]))] for a in JOINT_AXES} for f in folds],
        "default, fine-tuned embedding view": [
            {a: [fused(f, a, r, [v[a][r]], weights={"embedding": 0.0}) for r in range(len(f["ids"]))]
             for a in JOINT_AXES} for f, v in zip(folds, tuned_views, strict=True)],
    }
    print(f"\n{args.task}, first repetition; fine-tuned on {args.axis} pairs ({args.pairs} per record, max "
          f"{args.max_seq} tokens): {np.median(seconds):.0f} s per fold (median) on {torch.get_num_threads()} threads")
    print("| variant | kind acc | stage acc (Δ vs linear-fused [95%]) | symptom acc (Δ [95%]) | dmp -> training |")
    print("|---|---|---|---|---|")
    for name, dists in variants.items():
        row = score(samples_of(folds, dists), baseline, taxonomy)
        cells = [f"{row['kind']['accuracy']:.3f}"] + [
            f"{row[a]['accuracy']:.3f} ({row[a]['accuracy_diff']:+.3f} [{row[a]['accuracy_diff_ci'][0]:+.3f}, "
            f"{row[a]['accuracy_diff_ci'][1]:+.3f}])" for a in ("stage", "symptom")]
        print(f"| {name} | " + " | ".join([*cells, str(row["data_model_preparation -> training"])]) + " |")


if __name__ == "__main__":
    main()
