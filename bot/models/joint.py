"""Kind, stage and symptom decided together: each axis's own scores times how well the labels go together.

Each axis's classifier scores its labels alone, yet the labels of different axes are not independent: an
installation build failure happens at environment setup, a launch failure at communication setup, and a usage
question or a feature request rarely describes a failure. For each pair of these axes a compatibility table is
learned on the training cases, `C(a, b) = P(a, b) / (P(a) P(b))` with add-`smoothing` counts, so a pair never
seen keeps a small weight instead of none. The joint score of (kind, stage, symptom) is the product of the three
distributions and the three tables raised to `strength`; each axis's distribution is its marginal. A pair never
seen in training therefore wins only when both axes' own distributions are confident enough to outweigh the
table. The tables are data (arrays in the pack), not code.
"""

from __future__ import annotations

import numpy as np

from bot.models.predictors.base import Arrays, AxisDistributions, Meta, TrainingSet

JOINT_AXES = ("kind", "stage", "symptom")
PAIRS = (("kind", "stage"), ("kind", "symptom"), ("stage", "symptom"))
FLOOR = 1e-9  # keeps log() finite where an axis gives a label zero probability


class JointDecoder:
    """Compatibility tables of the pairs of `JOINT_AXES`, and the decoding that applies them."""

    def __init__(self, strength: float = 1.0, smoothing: float = 1.0, reward: bool = True) -> None:
        # reward=False keeps only the penalties: pairs rarer than independence lose, frequent ones gain nothing.
        self.strength, self.smoothing, self.reward = strength, smoothing, reward
        self.labels: dict[str, tuple[str, ...]] = {}
        self.log_compat: dict[tuple[str, str], np.ndarray] = {}

    def fit(self, data: TrainingSet) -> None:
        """Count the label pairs of the cases that teach both axes of each pair."""
        self.labels = {axis: data.taxonomy.predictable(axis) for axis in JOINT_AXES}
        for a, b in PAIRS:
            counts = np.zeros((len(self.labels[a]), len(self.labels[b])))
            index_a = {label: i for i, label in enumerate(self.labels[a])}
            index_b = {label: i for i, label in enumerate(self.labels[b])}
            for la, lb in zip(data.targets[a], data.targets[b], strict=True):
                if la in index_a and lb in index_b:
                    counts[index_a[la], index_b[lb]] += 1
            table = compatibility(counts, self.smoothing)
            self.log_compat[(a, b)] = table if self.reward else np.minimum(table, 0.0)

    def decode(self, dist: AxisDistributions) -> AxisDistributions:
        """The marginals of the joint over (kind, stage, symptom); other axes pass through unchanged."""
        if not self.log_compat or self.strength == 0:
            return dist
        logs = {axis: np.log(np.maximum([dist[axis].get(label, 0.0) for label in self.labels[axis]], FLOOR))
                for axis in JOINT_AXES}
        joint = (logs["kind"][:, None, None] + logs["stage"][None, :, None] + logs["symptom"][None, None, :]
                 + self.strength * (self.log_compat[("kind", "stage")][:, :, None]
                                    + self.log_compat[("kind", "symptom")][:, None, :]
                                    + self.log_compat[("stage", "symptom")][None, :, :]))
        weights = np.exp(joint - joint.max())
        weights /= weights.sum()
        marginals = {"kind": weights.sum(axis=(1, 2)), "stage": weights.sum(axis=(0, 2)),
                     "symptom": weights.sum(axis=(0, 1))}
        out = dict(dist)
        for axis, values in marginals.items():
            out[axis] = dict(zip(self.labels[axis], values.tolist(), strict=True))
        return out

    def state(self, prefix: str = "joint.") -> tuple[Arrays, Meta]:
        arrays = {f"{prefix}{a}.{b}": table.astype(np.float32) for (a, b), table in self.log_compat.items()}
        meta: Meta = {"labels": {axis: list(v) for axis, v in self.labels.items()}, "strength": self.strength,
                      "smoothing": self.smoothing, "reward": self.reward}
        return arrays, meta

    def restore(self, arrays: Arrays, meta: Meta, prefix: str = "joint.") -> None:
        self.labels = {axis: tuple(v) for axis, v in meta["labels"].items()}
        self.strength, self.smoothing = float(meta["strength"]), float(meta["smoothing"])
        self.reward = bool(meta["reward"])
        self.log_compat = {(a, b): arrays[f"{prefix}{a}.{b}"].astype(np.float64) for a, b in PAIRS}

    def round_trip(self) -> None:
        """Keep exactly what a stored copy holds (float32 tables), so a fresh fit and a loaded one agree."""
        self.restore(*self.state())


def compatibility(counts: np.ndarray, smoothing: float) -> np.ndarray:
    """log P(a, b) / (P(a) P(b)) from pair counts with add-`smoothing` on every cell (a row or column that
    no case taught is 0: no evidence either way)."""
    smoothed = counts + smoothing
    joint = smoothed / smoothed.sum()
    table = np.log(joint) - np.log(joint.sum(axis=1, keepdims=True)) - np.log(joint.sum(axis=0, keepdims=True))
    table[counts.sum(axis=1) == 0, :] = 0.0
    table[:, counts.sum(axis=0) == 0] = 0.0
    return table
