"""How similar must a labelled case be to earn a place in the comment? Precision per similarity bin.

Measured as the App sees it: every gold record with an opening post and an established symptom is read from its
opening post, dated, and its nearest cases among those opened before it in the rest of the case base (the case
base's text as `Settings.case_text` says; the record itself excluded) are paired with it; a pair is a hit when
both carry the same gold symptom. The
table gives, per cosine bin, how many pairs fall in it and what share are hits, and the share of hits
among all pairs at or above the bin's lower edge (what a floor there would show).

`memory_pairs` measures the repository memory's floors the same way: each record's nearest records of its own
repository opened before it (the memory holds a repository's issues as GitHub shows them: opening posts), for
failures (the gold symptom) or for questions (asked by questions, scored on the gold stage: a question rarely
has a symptom). A pair counts only where both labels are established (not `none` or `unknown`).

`nested_floor` says how much choosing the floor on the same records flatters it: the records are split in
PARTS parts (by a hash of their id); per part, the rule picks a floor from the other parts' pairs, and that
part's pairs are scored at it and at the shipped floor.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bot.core.settings import Settings
from bot.knowledge.dataset import Case, LoadReport, load_case_base
from bot.knowledge.taxonomy import load_taxonomy
from bot.models.embedding import Embedder, EmbeddingCache
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import normalise
from bot.reading.opening import as_opened, case_base_text
from eval.comment_scoring import UNSCORED_SYMPTOMS

BIN_WIDTH = 0.05
PARTS = 5
# The precision a precedent of the repository memory must reach: the comment's target for the repository's own
# precedents (README, "What it says"); the evidence floor asks only that most neighbours share the symptom.
PRECEDENT_TARGET = 0.80


@dataclass
class FloorRow:
    low: float
    pairs: int
    hits: int
    pairs_above: int
    hits_above: int

    @property
    def precision(self) -> float:
        return self.hits / self.pairs if self.pairs else float("nan")

    @property
    def precision_above(self) -> float:
        return self.hits_above / self.pairs_above if self.pairs_above else float("nan")


@dataclass
class Pairs:
    """Each scored record's neighbours: the record's id, the cosine, and whether both share the gold label."""

    query: np.ndarray
    sims: np.ndarray
    same: np.ndarray


def neighbour_pairs(settings: Settings, queries: list[Path], case_files: list[Path], k: int = 10) -> Pairs:
    taxonomy = load_taxonomy(settings.taxonomy)
    cases = case_base_text(load_case_base(case_files, taxonomy, LoadReport()), settings.case_text)
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    index = CaseIndex(cases, embedder.embed([normalise(c).text for c in cases]))
    opened = [as_opened(c) for c in load_case_base(queries, taxonomy, LoadReport())]
    asked = [c for c in opened if c is not None and established(c.labels.get("symptom"))]
    vectors = embedder.embed([normalise(c).text for c in asked])
    hits = index.nearest(vectors, k, [{c.id} for c in asked], before=[c.created_at for c in asked])
    return _scored(asked, hits, cases, "symptom")


def memory_pairs(settings: Settings, queries: list[Path], *, axis: str = "symptom", kind: str | None = None,
                 k: int = 3) -> Pairs:
    """Each dated record of a repository (of gold `kind`, when given) with an established gold `axis` label, as
    opened, paired with its k nearest records of the same repository opened before it: any record, as the memory
    recalls any issue or pull request, scored where that one's label is established too. These are the pairs the
    repository memory's floors decide on ("Seen before" for failures, "Asked before" for questions)."""
    taxonomy = load_taxonomy(settings.taxonomy)
    opened = [as_opened(c) for c in load_case_base(queries, taxonomy, LoadReport())]
    cases = [c for c in opened if c is not None and c.created_at is not None and c.repo]
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    vectors = embedder.embed([normalise(c).text for c in cases])
    by_repo: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        by_repo.setdefault(str(case.repo).lower(), []).append(i)
    out = Pairs(np.array([], dtype=object), np.array([], dtype=float), np.array([], dtype=bool))
    for rows in by_repo.values():
        own: list[Case] = [cases[i] for i in rows]
        index = CaseIndex(own, vectors[rows])
        asked = [i for i, c in enumerate(own)
                 if established(c.labels.get(axis)) and (kind is None or c.labels.get("kind") == kind)]
        hits = index.nearest(vectors[rows][asked], k, [{own[i].id} for i in asked],
                             before=[own[i].created_at for i in asked])
        found = _scored([own[i] for i in asked], hits, own, axis)
        out = Pairs(np.concatenate([out.query, found.query]), np.concatenate([out.sims, found.sims]),
                    np.concatenate([out.same, found.same]))
    return out


def established(label: str | None) -> bool:
    """A gold label a pair can be scored on: given, and neither `unknown` nor `none` (two feature requests, both
    of symptom `none`, do not share a failure)."""
    return label not in UNSCORED_SYMPTOMS


def _scored(asked: list[Case], hits: list[list[tuple[int, float]]], cases: list[Case], axis: str) -> Pairs:
    """The pairs of each asked record with its hits among `cases` whose `axis` label is established."""
    ids, sims, same = [], [], []
    for query, found in zip(asked, hits, strict=True):
        for j, sim in found:
            if established(cases[j].labels.get(axis)):
                ids.append(query.id)
                sims.append(sim)
                same.append(cases[j].labels[axis] == query.labels[axis])
    return Pairs(np.array(ids, dtype=object), np.array(sims, dtype=float), np.array(same, dtype=bool))


def measure_floor(settings: Settings, queries: list[Path], case_files: list[Path], k: int = 10) -> list[FloorRow]:
    pairs = neighbour_pairs(settings, queries, case_files, k)
    return bin_pairs(pairs.sims, pairs.same)


def chosen_floor(table: list[FloorRow], target: float | None = None) -> float | None:
    """The rule the shipped floor came from: the lowest bin from which on most neighbours share the label (every
    non-empty bin at or above it). With `target` (the memory's floors), the lowest bin from which on the share
    among all pairs at or above each bin reaches it. None when no bin qualifies."""
    floor = None
    for row in reversed([row for row in table if row.pairs]):
        if (row.precision <= 0.5) if target is None else (row.precision_above < target):
            break
        floor = row.low
    return floor


@dataclass
class NestedRow:
    part: int
    floor: float | None  # chosen on the other parts' pairs
    pairs: int  # this part's pairs at or above it
    hits: int
    pairs_fixed: int  # this part's pairs at or above the shipped floor
    hits_fixed: int


def part_of(record_id: str) -> int:
    return zlib.crc32(record_id.encode("utf-8")) % PARTS


def nested_floor(pairs: Pairs, fixed: float, target: float | None = None) -> list[NestedRow]:
    """Per part, the floor the rule (`chosen_floor`) picks on the other parts, and this part's pairs at it and at
    `fixed`."""
    parts = np.array([part_of(str(q)) for q in pairs.query], dtype=int)
    rows = []
    for part in range(PARTS):
        held, rest = parts == part, parts != part
        floor = chosen_floor(bin_pairs(pairs.sims[rest], pairs.same[rest]), target)
        at = held & (pairs.sims >= (floor if floor is not None else np.inf))
        at_fixed = held & (pairs.sims >= fixed)
        rows.append(NestedRow(part, floor, int(at.sum()), int(pairs.same[at].sum()), int(at_fixed.sum()),
                              int(pairs.same[at_fixed].sum())))
    return rows


def format_nested(rows: list[NestedRow], fixed: float, label: str = "symptom") -> str:
    def share(hits: int, n: int) -> str:
        return f"{hits / n:.2f}" if n else "-"

    lines = [f"| part | floor chosen on the other parts | pairs >= it | same {label} | pairs >= {fixed:.2f} | "
             f"same {label} |", "|---|---|---|---|---|---|"]
    for r in rows:
        chosen = "none" if r.floor is None else f"{r.floor:.2f}"
        lines.append(f"| {r.part} | {chosen} | {r.pairs} | {share(r.hits, r.pairs)} | {r.pairs_fixed} | "
                     f"{share(r.hits_fixed, r.pairs_fixed)} |")
    n, h = sum(r.pairs for r in rows), sum(r.hits for r in rows)
    nf, hf = sum(r.pairs_fixed for r in rows), sum(r.hits_fixed for r in rows)
    lines.append(f"| all | | {n} | {share(h, n)} | {nf} | {share(hf, nf)} |")
    return "\n".join(lines)


def bin_pairs(sims: np.ndarray, same: np.ndarray) -> list[FloorRow]:
    """Pairs per cosine bin from 0.20 up; the top bin holds everything from 0.95 (a copy's cosine may round above
    1.0)."""
    table = []
    lows = np.arange(0.2, 1.0, BIN_WIDTH)
    for low in lows:
        inside = (sims >= low) & ((sims < low + BIN_WIDTH) | (low == lows[-1]))
        above = sims >= low
        table.append(FloorRow(round(float(low), 2), int(inside.sum()), int(same[inside].sum()),
                              int(above.sum()), int(same[above].sum())))
    return [row for row in table if row.pairs_above]


def format_table(table: list[FloorRow], label: str = "symptom") -> str:
    lines = [f"| cosine bin | pairs | same {label} | pairs >= bin | same {label} >= bin |", "|---|---|---|---|---|"]
    for row in table:
        share = f"{row.precision:.2f}" if row.pairs else "-"
        lines.append(f"| [{row.low:.2f}, {row.low + BIN_WIDTH:.2f}) | {row.pairs} | {share} | "
                     f"{row.pairs_above} | {row.precision_above:.2f} |")
    return "\n".join(lines)
