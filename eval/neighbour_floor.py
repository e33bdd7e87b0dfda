"""How similar must a labelled case be to earn a place in the comment? Precision per similarity bin.

Measured as the App sees it: every gold record with an opening post and an established symptom is read from its
opening post, dated, and its nearest cases among those opened before it in the rest of the case base (the case
base's text as `Settings.case_text` says; the record itself excluded) are paired with it; a pair is a hit when
both carry the same gold symptom. The
table gives, per cosine bin, how many pairs fall in it and what share are hits, and the share of hits
among all pairs at or above the bin's lower edge (what a floor there would show).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bot.core.settings import Settings
from bot.knowledge.dataset import LoadReport, load_case_base
from bot.knowledge.taxonomy import load_taxonomy
from bot.models.embedding import Embedder, EmbeddingCache
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import normalise
from bot.reading.opening import as_opened, case_base_text

BIN_WIDTH = 0.05


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


def measure_floor(settings: Settings, queries: list[Path], case_files: list[Path], k: int = 10) -> list[FloorRow]:
    taxonomy = load_taxonomy(settings.taxonomy)
    cases = case_base_text(load_case_base(case_files, taxonomy, LoadReport()), settings.case_text)
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    index = CaseIndex(cases, embedder.embed([normalise(c).text for c in cases]))
    opened = [as_opened(c) for c in load_case_base(queries, taxonomy, LoadReport())]
    asked = [c for c in opened if c is not None and c.labels.get("symptom")]
    vectors = embedder.embed([normalise(c).text for c in asked])
    hits = index.nearest(vectors, k, [{c.id} for c in asked], before=[c.created_at for c in asked])
    sims, same = [], []
    for query, found in zip(asked, hits, strict=True):
        for j, sim in found:
            if cases[j].labels.get("symptom"):
                sims.append(sim)
                same.append(cases[j].labels["symptom"] == query.labels["symptom"])
    return _bin(np.array(sims), np.array(same, dtype=bool))


def _bin(sims: np.ndarray, same: np.ndarray) -> list[FloorRow]:
    table = []
    for low in np.arange(0.2, 1.0, BIN_WIDTH):
        inside = (sims >= low) & (sims < low + BIN_WIDTH)
        above = sims >= low
        table.append(FloorRow(round(float(low), 2), int(inside.sum()), int(same[inside].sum()),
                              int(above.sum()), int(same[above].sum())))
    return [row for row in table if row.pairs_above]


def format_table(table: list[FloorRow]) -> str:
    lines = ["| cosine bin | pairs | same symptom | pairs >= bin | same symptom >= bin |", "|---|---|---|---|---|"]
    for row in table:
        lines.append(f"| [{row.low:.2f}, {row.low + BIN_WIDTH:.2f}) | {row.pairs} | {row.precision:.2f} | "
                     f"{row.pairs_above} | {row.precision_above:.2f} |")
    return "\n".join(lines)
