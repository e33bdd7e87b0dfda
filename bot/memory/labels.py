"""A per-repository label model over the repository's own labels: a similarity-weighted vote of the nearest
issues of its history, per label a threshold chosen by leave-one-out over that history (over a sample of it
past `MAX_HELD_OUT` issues, so a fit is linear in the history) for a target precision; labels with too few
examples, or no threshold that reaches the target, are never suggested. `LabelModels` keeps each
repository's model and refits it outside the triage job."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from bot.memory.store import MemoryIssue

log = logging.getLogger(__name__)

K = 10
MAX_HELD_OUT = 4000  # issues held out in turn to choose the thresholds; all of them below this
GROWTH = 1.05  # a model is refitted once the history has grown by a twentieth since its fit
MIN_EXAMPLES = 5
TARGET_PRECISION = 0.8
MIN_SUPPORT = 3  # suggestions on the history at or above the threshold that the precision is judged on


@dataclass
class LabelModel:
    """Fitted on (issues, vectors) of one repository; `suggest` abstains by returning nothing."""

    issues: list[MemoryIssue]
    vectors: np.ndarray
    thresholds: dict[str, float] = field(default_factory=dict)
    precision: dict[str, float] = field(default_factory=dict)

    @classmethod
    def fit(cls, issues: list[MemoryIssue], vectors: np.ndarray, min_examples: int = MIN_EXAMPLES,
            target: float = TARGET_PRECISION) -> LabelModel:
        model = cls(issues, vectors)
        counts = Counter(name for issue in issues for name in issue.labels)
        labels = sorted(name for name, n in counts.items() if n >= min_examples)
        if not labels or len(issues) < 2:
            return model
        held_out = _held_out(issues, counts)
        scores = model._scores(vectors[held_out], held_out=held_out)
        for name in labels:
            truth = np.array([name in issues[i].labels for i in held_out])
            threshold, precision = _threshold_for(scores[name], truth, target)
            if threshold is not None:
                model.thresholds[name], model.precision[name] = threshold, precision
        return model

    def suggest(self, vector: np.ndarray) -> list[tuple[str, float]]:
        """Labels whose vote reaches their threshold, best first (empty: the model abstains)."""
        if not self.thresholds:
            return []
        scores = self._scores(vector[None, :])
        # Thresholds are on a 0.001 grid; a unanimous vote sums to 1 less a rounding error, which still counts.
        found = [(name, float(scores[name][0])) for name, t in self.thresholds.items()
                 if scores[name][0] >= t - 1e-6]
        return sorted(found, key=lambda item: -item[1])

    def _scores(self, queries: np.ndarray, held_out: np.ndarray | None = None, chunk: int = 1024
                ) -> dict[str, np.ndarray]:
        """Per label, the similarity-weighted share of the k nearest issues that carry it (in row chunks, so a
        leave-one-out never holds an n x n matrix); `held_out`: each query's own row, left out of its vote."""
        k = min(K, self.vectors.shape[0] - (1 if held_out is not None else 0))
        names = self._labels()
        has = np.array([[name in issue.labels for name in names] for issue in self.issues], dtype=np.float32)
        out = np.zeros((len(queries), len(names)), dtype=np.float32)
        for start in range(0, len(queries), chunk):
            sims = queries[start:start + chunk] @ self.vectors.T
            if held_out is not None:
                sims[np.arange(len(sims)), held_out[start:start + chunk]] = -np.inf
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            weights = np.clip(np.take_along_axis(sims, top, axis=1), 0.0, None)
            out[start:start + chunk] = np.einsum("qk,qkl->ql", weights, has[top]) / (
                weights.sum(axis=1, keepdims=True) + 1e-9)
        return {name: out[:, j] for j, name in enumerate(names)}

    def _labels(self) -> list[str]:
        return sorted(self.thresholds) if self.thresholds else sorted({n for i in self.issues for n in i.labels})


def _threshold_for(scores: np.ndarray, truth: np.ndarray, target: float) -> tuple[float | None, float]:
    """The lowest vote threshold whose precision on the history reaches `target` with enough support."""
    for t in np.unique(np.round(scores, 3)):
        picked = scores >= t
        if t <= 0 or picked.sum() < MIN_SUPPORT:
            continue
        precision = float(truth[picked].mean())
        if precision >= target:
            return float(t), precision
    return None, 0.0


def _held_out(issues: list[MemoryIssue], counts: Counter[str], limit: int = MAX_HELD_OUT) -> np.ndarray:
    """The rows whose leave-one-out votes choose the thresholds: every row when there are at most `limit`;
    else every example of the rarer labels first (so each label keeps its support), then a fixed-seed sample."""
    if len(issues) <= limit:
        return np.arange(len(issues))
    rare = {name for name, n in counts.items() if n <= limit // 20}
    first = [i for i, issue in enumerate(issues) if rare.intersection(issue.labels)][:limit]
    rest = np.setdiff1d(np.arange(len(issues)), first)
    rng = np.random.default_rng(0)
    fill = rng.choice(rest, size=min(len(rest), limit - len(first)), replace=False)
    return np.sort(np.concatenate([np.asarray(first, dtype=np.int64), fill.astype(np.int64)]))


Loader = Callable[[str], tuple[list[MemoryIssue], np.ndarray]]


class LabelModels:
    """This process's label model of each repository. Triage only reads: a missing or outgrown model is
    refitted in a background thread (one per repository at a time) while triage uses the one it has (none:
    no suggestion), and the sync job fits a repository's model once its history is in (`refit`)."""

    def __init__(self, load: Loader, count: Callable[[str], int], background: bool = True) -> None:
        self._load, self._count, self._background = load, count, background
        self._models: dict[str, LabelModel] = {}
        self._fitting: set[str] = set()
        self._generation: dict[str, int] = {}  # bumped by `forget`: a fit that started before is dropped
        self._lock = threading.Lock()

    def current(self, repo: str) -> LabelModel:
        """The repository's model as it stands (empty: it abstains); starts a refit when it is due."""
        with self._lock:
            model = self._models.get(repo)
        if model is None or self._count(repo) > GROWTH * len(model.issues) + 1:
            self._refit_soon(repo)
        return model if model is not None else LabelModel([], np.zeros((0, 0), dtype=np.float32))

    def refit(self, repo: str) -> LabelModel:
        """Fit the repository's model now (outside triage: the sync job, a background thread)."""
        with self._lock:
            generation = self._generation.get(repo, 0)
        model = LabelModel.fit(*self._load(repo))
        with self._lock:
            if self._generation.get(repo, 0) == generation:
                self._models[repo] = model
        return model

    def forget(self, repo: str) -> None:
        with self._lock:
            self._models.pop(repo, None)
            self._generation[repo] = self._generation.get(repo, 0) + 1

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until no background fit runs (tests, and a clean shutdown)."""
        for thread in [t for t in threading.enumerate() if t.name.startswith("ddl-triage-labels-")]:
            thread.join(timeout)

    def _refit_soon(self, repo: str) -> None:
        if not self._background:
            self.refit(repo)
            return
        with self._lock:
            if repo in self._fitting:
                return
            self._fitting.add(repo)
        threading.Thread(target=self._refit_logged, args=(repo,), name=f"ddl-triage-labels-{repo}",
                         daemon=True).start()

    def _refit_logged(self, repo: str) -> None:
        try:
            self.refit(repo)
        except Exception:  # a failed fit keeps the model it had; the next triage starts another
            log.exception("label model of %s: the refit failed", repo)
        finally:
            with self._lock:
                self._fitting.discard(repo)
