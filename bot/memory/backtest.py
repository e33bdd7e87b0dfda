"""Backtest from the synced memory (no API calls): replay a repository's last N issues in time order, each
seeing only the issues opened before it, and measure what the App would have said."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from bot.memory.labels import LabelModel
from bot.memory.store import MemoryIssue, MemoryStore


@dataclass
class Replayed:
    number: int
    labels: list[str]
    suggested: list[str]
    related: list[tuple[int, float]]
    duplicate_of: int | None
    seconds: float


@dataclass
class BacktestResult:
    repo: str
    replayed: int
    history: int
    related_floor: float
    label_precision: float | None
    label_coverage: float
    per_label: dict[str, dict[str, float]]
    duplicates: int
    duplicates_found: int
    related_rate: float
    related_shares_label: float | None
    seconds_per_issue: float
    issues: list[Replayed] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        data = asdict(self)
        data.pop("issues")
        return data


def run_backtest(store: MemoryStore, repo: str, last: int, related_floor: float, k: int = 3) -> BacktestResult:
    """Replay the last `last` issues (pull requests are context, not replayed)."""
    issues, vectors = store.vectors(repo)
    order = np.argsort([i.created_at for i in issues], kind="stable")
    issues, vectors = [issues[j] for j in order], vectors[order]
    targets = [j for j, issue in enumerate(issues) if issue.type == "issue"][-last:]
    if not targets:
        raise ValueError(f"{repo} has no synced issues; run `ddl-triage history sync --repo {repo}` first")
    # The label model is fitted once on what existed before the first replayed issue (a backtest starts there).
    first = targets[0]
    model = LabelModel.fit(issues[:first], vectors[:first])
    replayed: list[Replayed] = []
    for j in targets:
        started = time.perf_counter()
        before = vectors[:j]
        sims = before @ vectors[j] if j else np.zeros(0)
        top = np.argsort(-sims, kind="stable")[:k]
        related = [(issues[t].number, float(sims[t])) for t in top if sims[t] >= related_floor]
        suggested = [name for name, _ in model.suggest(vectors[j])]
        replayed.append(Replayed(issues[j].number, issues[j].labels, suggested, related, issues[j].duplicate_of,
                                 time.perf_counter() - started))
    return summarise(repo, replayed, first, related_floor, issues)


def summarise(repo: str, replayed: list[Replayed], history: int, floor: float,
              issues: list[MemoryIssue]) -> BacktestResult:
    suggested = [(r, name) for r in replayed for name in r.suggested]
    correct = [name in r.labels for r, name in suggested]
    per_label: dict[str, dict[str, float]] = {}
    for name in sorted({name for _, name in suggested}):
        hits = [name in r.labels for r, n in suggested if n == name]
        applied = sum(name in r.labels for r in replayed)
        per_label[name] = {"suggested": len(hits), "precision": float(np.mean(hits)),
                           "recall": sum(hits) / applied if applied else 0.0}
    by_number = {i.number: i for i in issues}
    dups = [r for r in replayed if r.duplicate_of is not None]
    found = [r for r in dups if r.duplicate_of in {n for n, _ in r.related}]
    with_related = [r for r in replayed if r.related]
    shares = [bool(set(r.labels) & set(by_number[r.related[0][0]].labels)) for r in with_related if r.labels]
    return BacktestResult(
        repo=repo, replayed=len(replayed), history=history, related_floor=floor,
        label_precision=float(np.mean(correct)) if correct else None,
        label_coverage=sum(bool(r.suggested) for r in replayed) / len(replayed), per_label=per_label,
        duplicates=len(dups), duplicates_found=len(found), related_rate=len(with_related) / len(replayed),
        related_shares_label=float(np.mean(shares)) if shares else None,
        seconds_per_issue=float(np.mean([r.seconds for r in replayed])), issues=replayed)
