"""Would an embedding of the title alone, as one more view of `linear-structured`, help kind, stage or symptom?

The default embeds the normalised title and body together (the model reads at most 256 word pieces, and a long
body dilutes the title, which often names where a run failed: "load", "convert", "preprocess", "generate").
This trial adds a view: the title alone, embedded by the same packaged model, with a balanced logistic
regression per axis (the embedding view's C), joined to the geometric mean of the views each axis already fuses,
as one more equal vote (no weight is tuned). Measured as opened: each test record is its opening post, dated, and
only cases opened before it are retrieved; the folds are the task's (`python -m eval run --task ...`).

    python bench/title_embedding_view.py [--task ddl-dev-cv] [--repeats 1] [--jobs 2]

Prints, per axis, the default's accuracy, the trial's, their paired difference with its 95% bootstrap interval,
and issue #16's two named errors for each.
"""

from __future__ import annotations

import argparse
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from label_views import ERRORS, samples_of, score, task_splits
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from bot.core.settings import Settings
from bot.knowledge.taxonomy import load_taxonomy
from bot.models.engine import build_training_set, make_queries
from bot.models.joint import JOINT_AXES
from bot.models.predictors.base import PerAxisModels
from bot.models.predictors.fused import VIEWS, fuse
from bot.models.predictors.structured import StructuredPredictor
from bot.reading.normalise import normalise
from bot.reading.opening import case_base_text
from eval.jobs import make_embedder
from eval.splits import Split, with_text


def fold(split: Split, settings: Settings) -> dict[str, Any]:
    """One fold: the default's fused distributions of the test records, and the trial's (one more view)."""
    with threadpool_limits(limits=1):
        taxonomy = load_taxonomy(settings.taxonomy)
        embedder = make_embedder(settings)
        training, _ = build_training_set(case_base_text(split.train, settings.case_text), taxonomy, embedder,
                                         settings.use_silver)
        predictor = StructuredPredictor()
        predictor.fit(training)
        normalised = [normalise(c) for c in split.test]
        queries = make_queries(training.index, normalised, embedder.embed([n.text for n in normalised]), 5, None,
                               [c.created_at for c in split.test])
        views = predictor.view_distributions(queries)
        titles = PerAxisModels(LogisticRegression(C=predictor.c, max_iter=3000, class_weight="balanced"))
        titles.fit(training, sparse.csr_matrix(embedder.embed([c.title or "" for c in training.index.cases])))
        title_view = titles.predict(sparse.csr_matrix(embedder.embed([n.title for n in normalised])), len(queries))
        default, trial = {}, {}
        for axis in JOINT_AXES:
            base = [*VIEWS, *predictor.axis_views.get(axis, ())]
            default[axis] = [fuse([views[v][i][axis] for v in base]) for i in range(len(queries))]
            trial[axis] = [fuse([*(views[v][i][axis] for v in base), title_view[i][axis]])
                           for i in range(len(queries))]
        return {"ids": [c.id for c in split.test], "repeat": split.repeat,
                "gold": [{a: c.labels.get(a) for a in JOINT_AXES} for c in split.test],
                "default": default, "trial": trial}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="ddl-dev-cv")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    settings, taxonomy, splits = task_splits(args.task, args.repeats)
    splits = with_text(splits, "opened")
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        folds = list(pool.map(fold, splits, [settings] * len(splits)))
    default = samples_of(folds, [f["default"] for f in folds])
    trial = samples_of(folds, [f["trial"] for f in folds])
    base_row, row = score(default, default, taxonomy), score(trial, default, taxonomy)
    print(f"{args.task}, {args.repeats} repetition(s), as opened: {len(default)} record-repetitions scored")
    print("| axis | default accuracy | with the title view | Δ accuracy [95%] | Δ macro-F1 [95%] |")
    print("|---|---|---|---|---|")
    for axis in JOINT_AXES:
        r = row[axis]
        print(f"| {axis} | {base_row[axis]['accuracy']:.3f} | {r['accuracy']:.3f} | {r['accuracy_diff']:+.3f} "
              f"[{r['accuracy_diff_ci'][0]:+.3f}, {r['accuracy_diff_ci'][1]:+.3f}] | {r['macro_f1_diff']:+.3f} "
              f"[{r['macro_f1_diff_ci'][0]:+.3f}, {r['macro_f1_diff_ci'][1]:+.3f}] |")
    for gold, wrong in ERRORS.values():
        name = f"{gold} -> {wrong}"
        print(f"{name}: {base_row[name]} -> {row[name]}")
    print(f"(scored records: {np.unique([s['id'] for s in default]).size})")


if __name__ == "__main__":
    main()
