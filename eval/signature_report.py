"""How often do error signatures recur in the gold data, and do two threads sharing one share the gold symptom?

Over every record of the given gold files: coverage (records with at least one signature, by kind), recurrence
(records sharing a signature with another record; distinct signatures that recur) and precision (pairs of records
sharing a signature that carry the same established gold symptom, by kind), beside the same precision for pairs
whose embeddings are at or above a cosine floor (the comment's other way to call a case related).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bot.core.domain import Case
from bot.core.settings import Settings
from bot.knowledge.dataset import LoadReport, load_case_base
from bot.knowledge.taxonomy import Taxonomy, load_taxonomy
from bot.models.embedding import Embedder, EmbeddingCache
from bot.reading.normalise import NormalisedIssue, normalise
from bot.reading.signatures import KINDS, MATCHING_KINDS

COSINE_FLOORS = (0.75, 0.80)
ANY = "any kind"
MATCHING = "any but signal, exit code"  # the kinds that pull a case into the neighbours (bot/models/retrieval.py)


@dataclass
class KindRow:
    """One row of the table: a signature kind, every kind together, or a cosine floor."""

    name: str
    records: int = 0  # records with a signature of this kind
    recurring_records: int = 0  # ... that share one with another record
    distinct: int = 0  # distinct signatures of this kind
    recurring: int = 0  # ... found in more than one record
    pairs: int = 0  # pairs of records sharing one, both with an established gold symptom
    hits: int = 0  # ... whose gold symptoms are the same

    @property
    def precision(self) -> float:
        return self.hits / self.pairs if self.pairs else float("nan")


@dataclass
class SignatureReport:
    records: int
    rows: list[KindRow]  # ANY and MATCHING first, then each kind that occurs
    floors: list[KindRow]  # one per cosine floor, over the same records
    beyond_floor: KindRow  # pairs sharing a signature of MATCHING_KINDS whose cosine is under the lowest floor


def measure_signatures(settings: Settings, files: list[Path]) -> SignatureReport:
    """The report over every record of `files` (their text, signatures, embeddings and gold symptoms)."""
    taxonomy = load_taxonomy(settings.taxonomy)
    cases = load_case_base(files, taxonomy, LoadReport())
    normalised = [normalise(c) for c in cases]
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    vectors = embedder.embed([n.text for n in normalised]) if cases else np.zeros((0, 1), dtype=np.float32)
    return report_from(cases, normalised, vectors, taxonomy)


def report_from(cases: list[Case], normalised: list[NormalisedIssue], vectors: np.ndarray,
                taxonomy: Taxonomy) -> SignatureReport:
    symptoms = [c.labels.get("symptom") if taxonomy.is_established("symptom", c.labels.get("symptom")) else None
                for c in cases]
    holders: dict[tuple[str, str], list[int]] = defaultdict(list)  # (kind, digest) -> records
    for i, n in enumerate(normalised):
        for s in n.signatures:
            holders[(s.kind, s.digest)].append(i)
    sims = vectors @ vectors.T if len(vectors) else np.zeros((0, 0))
    rows = [_kind_row(kind, holders, symptoms) for kind in (ANY, MATCHING, *KINDS)]
    floors = [_floor_row(floor, sims, symptoms) for floor in COSINE_FLOORS]
    shared = _pairs([r for (kind, _), r in holders.items() if kind in MATCHING_KINDS])
    below = {p for p in shared if sims[p] < min(COSINE_FLOORS)}
    beyond = KindRow(f"{MATCHING}, cosine < {min(COSINE_FLOORS):.2f}")
    _score(beyond, below, symptoms)
    return SignatureReport(records=len(cases), rows=[r for r in rows if r.records], floors=floors,
                           beyond_floor=beyond)


def _pairs(groups: list[list[int]]) -> set[tuple[int, int]]:
    return {(a, b) for group in groups for a, b in itertools.combinations(sorted(set(group)), 2)}


def _score(row: KindRow, pairs: set[tuple[int, int]], symptoms: list[str | None]) -> None:
    scored = [(a, b) for a, b in pairs if symptoms[a] and symptoms[b]]
    row.pairs = len(scored)
    row.hits = sum(symptoms[a] == symptoms[b] for a, b in scored)


def _kind_row(kind: str, holders: dict[tuple[str, str], list[int]], symptoms: list[str | None]) -> KindRow:
    groups = [records for (k, _), records in holders.items()
              if kind in (ANY, k) or (kind == MATCHING and k in MATCHING_KINDS)]
    row = KindRow(kind)
    row.records = len({i for g in groups for i in g})
    row.recurring_records = len({i for g in groups if len(set(g)) > 1 for i in g})
    row.distinct = len(groups)
    row.recurring = sum(len(set(g)) > 1 for g in groups)
    _score(row, _pairs(groups), symptoms)
    return row


def _floor_row(floor: float, sims: np.ndarray, symptoms: list[str | None]) -> KindRow:
    a, b = np.nonzero(np.triu(sims >= floor, k=1))
    row = KindRow(f"cosine >= {floor:.2f}")
    row.records = len(set(a.tolist()) | set(b.tolist()))
    _score(row, set(zip(a.tolist(), b.tolist(), strict=True)), symptoms)
    return row


def format_report(report: SignatureReport) -> str:
    """The README's table: coverage and recurrence per kind, then precision beside the cosine floors."""
    def share(n: int) -> str:
        return f"{n} ({n / report.records:.0%})" if report.records else "0"

    def precision(row: KindRow) -> str:
        return f"{row.precision:.2f}" if row.pairs else "-"

    lines = ["| signature kind | records with one | records sharing one | distinct | recurring | pairs | "
             "same gold symptom |", "|---|---|---|---|---|---|---|"]
    for row in report.rows:
        lines.append(f"| {row.name} | {share(row.records)} | {share(row.recurring_records)} | {row.distinct} | "
                     f"{row.recurring} | {row.pairs} | {precision(row)} |")
    for row in [*report.floors, report.beyond_floor]:
        lines.append(f"| {row.name} | | | | | {row.pairs} | {precision(row)} |")
    return "\n".join(lines)
