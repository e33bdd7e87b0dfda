"""Choose the repository memory's similarity floor by measurement: on gold issues grouped by repository, each
issue's nearest issues of the SAME repository, binned by cosine, with the share that has the same gold label.

    .venv/bin/python bench/related_floor.py [--gold ../shared/data/gold/ddl-dev.jsonl ...] [--axis symptom]
        [--kind usage_question]

With `--kind`, only issues of that gold kind take part, on both sides of a pair: the floor of "Asked before"
(a question near-duplicate of an earlier question of the repository) is measured on questions alone.
"""

from __future__ import annotations

import argparse
import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np

from bot.core.paths import default_data_dir
from bot.core.settings import Settings
from bot.knowledge.dataset import load_gold
from bot.knowledge.taxonomy import load_taxonomy
from bot.models.embedding import Embedder, EmbeddingCache
from bot.reading.normalise import normalise
from bot.reading.opening import has_opening_post, opening_post

BINS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.01)


def main() -> None:
    data_dir = default_data_dir()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold", type=Path, nargs="+",
                        default=[data_dir / "ddl-dev.jsonl"] if data_dir else None)
    parser.add_argument("--axis", default="symptom")
    parser.add_argument("--kind", default=None, help="only issues of this gold kind (e.g. usage_question)")
    parser.add_argument("--as-opened", action="store_true",
                        help="embed each window's opening post only (bot/reading/opening.py), as GitHub holds it")
    parser.add_argument("--k", type=int, default=3)
    args = parser.parse_args()
    settings = Settings()
    taxonomy = load_taxonomy(settings.taxonomy)
    cases = [c for path in args.gold for c in load_gold(path, taxonomy) if c.labels.get(args.axis)
             and (args.kind is None or c.labels.get("kind") == args.kind)]
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    if args.as_opened:
        cases = [c.model_copy(update={"body": opening_post(c.body)}) for c in cases if has_opening_post(c.body)]
    vectors = embedder.embed([normalise(c).text for c in cases])
    by_repo: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(cases):
        by_repo[c.repo or ""].append(i)
    pairs: list[tuple[float, bool]] = []
    for rows in by_repo.values():
        sims = vectors[rows] @ vectors[rows].T
        np.fill_diagonal(sims, -1.0)
        for a, row in enumerate(sims):
            for b in np.argsort(-row)[: args.k]:
                if row[b] > -1.0:
                    pairs.append((float(row[b]), cases[rows[a]].labels[args.axis] == cases[rows[b]].labels[args.axis]))
    kind = f" of kind {args.kind}" if args.kind else ""
    kind += " (opening posts)" if args.as_opened else ""
    print(f"{len(cases)} gold issues{kind} with a {args.axis} label in {len(by_repo)} repositories "
          f"({', '.join(p.name for p in args.gold)}); "
          f"top-{args.k} same-repository neighbours")
    print(f"{'cosine':>12} {'pairs':>6} {'same ' + args.axis:>14}")
    for low, high in itertools.pairwise(BINS):
        hits = [same for s, same in pairs if low <= s < high]
        share = f"{100 * np.mean(hits):.0f}%" if hits else "-"
        print(f"{low:.2f}-{min(high, 1.0):.2f} {len(hits):>6} {share:>14}")
    for floor in (0.7, 0.75, 0.8, 0.85, 0.9):
        hits = [same for s, same in pairs if s >= floor]
        share = f"{100 * np.mean(hits):.0f}%" if hits else "-"
        print(f">= {floor:.2f}    {len(hits):>6} {share:>14}")


if __name__ == "__main__":
    main()
