"""The repository's own labelled memory in the taxonomy axes: maintainers' corrections, and maintainers'
labels mapped to taxonomy ids by the config's `labels.names`, override the pack's vote for near-identical
issues of that repository only. Blended into the axis distribution before the policy decides; no refit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bot.core.domain import Issue, TriageResult
from bot.deciding.repo_config import RepoConfig
from bot.memory.index import MemoryIndex
from bot.models.embedding import Embedder, text_hash
from bot.models.engine import Engine
from bot.models.policy import decide
from bot.reading.normalise import normalise

OVERRIDE_FLOOR = 0.90  # cosine; below this a labelled issue of the repository is evidence, not an override


@dataclass(frozen=True)
class LabelledExample:
    """A taxonomy value an issue of the repository carries (from a correction or a mapped label)."""

    axis: str
    value: str
    score: float
    source: str  # "correction" | "label"


def taxonomy_labels(config: RepoConfig) -> dict[str, tuple[str, str]]:
    """Repository label name (case-folded) -> (axis, taxonomy value): the config's `labels.names`, reversed."""
    return {name.casefold(): (axis, value) for axis, names in config.labels.names.items()
            for value, name in names.items()}


def corrected_examples(embedder: Embedder, vector: np.ndarray, rows: Sequence[dict[str, object]], repo: str,
                       number: int | None, floor: float = OVERRIDE_FLOOR) -> list[LabelledExample]:
    """Corrections of other issues of `repo` whose text is at least `floor` similar to the issue."""
    mine = [r for r in rows if r["repo"] == repo and r["number"] != number]
    if not mine:
        return []
    texts = [correction_text(r) for r in mine]
    sims = embedder.embed(texts) @ vector
    return [LabelledExample(str(r["axis"]), str(r["value"]), float(s), "correction")
            for r, s in zip(mine, sims, strict=True) if s >= floor]


def correction_text(row: dict[str, object]) -> str:
    """The text a correction's issue is embedded as: its title and body when the maintainer corrected it."""
    return normalise(Issue(title=str(row["title"] or ""), body=str(row["body"] or ""))).text


def correction_text_hashes(rows: Sequence[dict[str, object]]) -> list[str]:
    """The embedding cache's keys of those corrections' texts (to forget with their repository or issue)."""
    return sorted({text_hash(correction_text(r)) for r in rows})


def labelled_examples(index: MemoryIndex, vector: np.ndarray, repo: str, number: int | None,
                      config: RepoConfig, floor: float = OVERRIDE_FLOOR) -> list[LabelledExample]:
    """Issues of `repo` in its memory, at least `floor` similar, whose labels map to taxonomy values."""
    mapping = taxonomy_labels(config)
    if not mapping:
        return []
    found = []
    for issue, score in index.search(repo, vector, k=10, exclude=number):
        if score < floor:
            break
        found += [LabelledExample(*mapping[name.casefold()], score, "label")
                  for name in issue.labels if name.casefold() in mapping]
    return found


def blend(engine: Engine, result: TriageResult, examples: Sequence[LabelledExample]) -> TriageResult:
    """Per axis, the closest example's value mixed into the distribution (weight 0.5 at the floor, 1 at an
    exact copy), then the engine's own calibrated policy decides again (a bare report stays without labels)."""
    best: dict[str, LabelledExample] = {}
    for ex in examples:
        if ex.axis in result.predictions and (ex.axis not in best or ex.score > best[ex.axis].score):
            best[ex.axis] = ex
    if not best:
        return result
    predictions = dict(result.predictions)
    for axis, ex in best.items():
        weight = 0.5 + 0.5 * min(1.0, max(0.0, (ex.score - OVERRIDE_FLOOR) / (1.0 - OVERRIDE_FLOOR)))
        dist = {label: (1.0 - weight) * p for label, p in predictions[axis].top}
        dist[ex.value] = dist.get(ex.value, 0.0) + weight
        predictions[axis] = decide(axis, dist, engine.calibrator, engine.settings.threshold(axis),
                                   needs_details=result.needs_details)
    return result.model_copy(update={"predictions": predictions})
