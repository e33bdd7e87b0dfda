"""A per-repository label model over the repository's own labels: a similarity-weighted vote of the nearest
issues of its history, per label a threshold chosen by leave-one-out over that history (over a sample of it
past `MAX_HELD_OUT` issues, so a fit is linear in the history) for a target precision; labels with too few
examples, or no threshold that reaches the target, are never suggested. `LabelModels` keeps each
repository's model and refits it outside the triage job."""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict
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
    """Fitted on (issues, vectors) of one repository; `suggest` abstains by returning nothing. It keeps only
    what a vote needs: the vectors and, per issue, which of the model's labels it carries (a 0/1 matrix built
    once, so `suggest` is one matrix product and no Python loop over the history)."""

    vectors: np.ndarray
    names: list[str] = field(default_factory=list)  # the labels voted on: the columns of `has`
    has: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    thresholds: dict[str, float] = field(default_factory=dict)
    precision: dict[str, float] = field(default_factory=dict)
    size: int = -1  # issues of the history it was fitted on (its vectors are dropped when it abstains)

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = int(self.vectors.shape[0])

    @property
    def held(self) -> int:
        """Rows it holds in memory (what the LRU of `LabelModels` counts)."""
        return int(self.vectors.shape[0])

    @classmethod
    def empty(cls) -> LabelModel:
        return cls(np.zeros((0, 0), dtype=np.float32))

    @classmethod
    def fit(cls, issues: list[MemoryIssue], vectors: np.ndarray, min_examples: int = MIN_EXAMPLES,
            target: float = TARGET_PRECISION) -> LabelModel:
        counts = Counter(name for issue in issues for name in issue.labels)
        labels = sorted(name for name, n in counts.items() if n >= min_examples)
        model = cls(np.asarray(vectors, dtype=np.float32), labels, _membership(issues, labels))
        if not labels or len(issues) < 2:
            return model.keeping([])
        held_out = held_out_rows(issues, counts)
        scores = model._scores(model.vectors[held_out], held_out=held_out)
        for j, name in enumerate(labels):
            truth = model.has[held_out, j] > 0
            threshold, precision = _threshold_for(scores[:, j], truth, target)
            if threshold is not None:
                model.thresholds[name], model.precision[name] = threshold, precision
        return model.keeping(sorted(model.thresholds))

    def keeping(self, names: list[str]) -> LabelModel:
        """The model with only these labels' columns (those that reached a threshold): less to hold and vote."""
        columns = [self.names.index(name) for name in names]
        self.has, self.names = np.ascontiguousarray(self.has[:, columns]), list(names)
        if not names:  # it abstains whatever it is asked: nothing to keep
            self.vectors, self.has = np.zeros((0, 0), dtype=np.float32), np.zeros((0, 0), dtype=np.float32)
        return self

    def suggest(self, vector: np.ndarray) -> list[tuple[str, float]]:
        """Labels whose vote reaches their threshold, best first (empty: the model abstains)."""
        if not self.thresholds or self.held == 0:
            return []
        scores = self._scores(np.asarray(vector, dtype=np.float32)[None, :])[0]
        limits = np.array([self.thresholds[name] for name in self.names], dtype=np.float32)
        # Thresholds are on a 0.001 grid; a unanimous vote sums to 1 less a rounding error, which still counts.
        found = np.flatnonzero(scores >= limits - 1e-6)
        return sorted(((self.names[j], float(scores[j])) for j in found), key=lambda item: -item[1])

    def _scores(self, queries: np.ndarray, held_out: np.ndarray | None = None, chunk: int = 1024) -> np.ndarray:
        """Per query and label (columns of `has`), the similarity-weighted share of the k nearest issues that
        carry it (in row chunks, so a leave-one-out never holds an n x n matrix); `held_out`: each query's own
        row, left out of its vote."""
        k = min(K, self.held - (1 if held_out is not None else 0))
        out = np.zeros((len(queries), len(self.names)), dtype=np.float32)
        if k <= 0:
            return out
        for start in range(0, len(queries), chunk):
            sims = queries[start:start + chunk] @ self.vectors.T
            if held_out is not None:
                sims[np.arange(len(sims)), held_out[start:start + chunk]] = -np.inf
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            weights = np.clip(np.take_along_axis(sims, top, axis=1), 0.0, None)
            out[start:start + chunk] = np.einsum("qk,qkl->ql", weights, self.has[top]) / (
                weights.sum(axis=1, keepdims=True) + 1e-9)
        return out


def _membership(issues: list[MemoryIssue], names: list[str]) -> np.ndarray:
    """The 0/1 matrix of which issue carries which label (built once per fit)."""
    column = {name: j for j, name in enumerate(names)}
    has = np.zeros((len(issues), len(names)), dtype=np.float32)
    for i, issue in enumerate(issues):
        for name in issue.labels:
            if name in column:
                has[i, column[name]] = 1.0
    return has


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


def held_out_rows(issues: list[MemoryIssue], counts: Counter[str], limit: int = MAX_HELD_OUT) -> np.ndarray:
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

    def __init__(self, load: Loader, count: Callable[[str], int], background: bool = True,
                 max_rows: int = 500_000) -> None:
        self._load, self._count, self._background = load, count, background
        self.max_rows = max_rows  # across every repository's model; the least recently used go first
        self._models: OrderedDict[str, LabelModel] = OrderedDict()
        self._fitting: set[str] = set()
        self._generation: dict[str, int] = {}  # bumped by `forget`: a fit that started before is dropped
        self._lock = threading.Lock()

    def current(self, repo: str) -> LabelModel:
        """The repository's model as it stands (empty: it abstains); starts a refit when it is due."""
        with self._lock:
            model = self._models.get(repo)
            if model is not None:
                self._models.move_to_end(repo)
        if model is None or self._count(repo) > GROWTH * model.size + 1:
            self._refit_soon(repo)
        return model if model is not None else LabelModel.empty()

    def loaded_repos(self) -> list[str]:
        with self._lock:
            return list(self._models)

    def refit(self, repo: str) -> LabelModel:
        """Fit the repository's model now (outside triage: the sync job, a background thread)."""
        with self._lock:
            generation = self._generation.get(repo, 0)
        model = LabelModel.fit(*self._load(repo))
        with self._lock:
            if self._generation.get(repo, 0) == generation:
                self._models[repo] = model
                self._models.move_to_end(repo)
                while len(self._models) > 1 and sum(m.held for m in self._models.values()) > self.max_rows:
                    self._models.popitem(last=False)  # refitted when its repository's next triage asks
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
