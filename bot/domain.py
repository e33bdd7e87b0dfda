"""Domain types shared by the engine, the CLI, the service and the benchmarks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bot.settings import AXES

Labels = dict[str, str | None]


class Issue(BaseModel):
    """An issue to triage: what the engine needs, nothing GitHub-specific."""

    id: str = "issue"
    title: str = ""
    body: str = ""
    repo: str | None = None
    number: int | None = None
    url: str | None = None


class Case(Issue):
    """A labelled issue of the case base (a gold record)."""

    model_config = ConfigDict(extra="ignore")

    source_file: str = ""
    type: str | None = None
    state: str | None = None
    labels: Labels = Field(default_factory=dict)
    silver: Labels = Field(default_factory=dict)
    native: dict[str, object] | None = None


class EnvironmentFacts(BaseModel):
    """Versions and hardware pulled out of the issue text; None where the text does not say."""

    framework: str | None = None
    framework_version: str | None = None
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    python: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    nodes: int | None = None

    def known(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.model_dump().items() if v is not None}


class AxisPrediction(BaseModel):
    """One axis: the shown label (None when abstaining), its calibrated confidence and the ranking head."""

    label: str | None
    confidence: float
    top: list[tuple[str, float]]


class Neighbour(BaseModel):
    id: str
    url: str | None
    title: str | None = None
    score: float
    labels: Labels = Field(default_factory=dict)


class TriageResult(BaseModel):
    """Everything the bot decided about one issue."""

    issue_id: str
    predictions: dict[str, AxisPrediction]
    neighbours: list[Neighbour]
    environment: EnvironmentFacts
    predictor: str
    taxonomy_version: str
    model_id: str
    fallback: str | None = None

    def label(self, axis: str) -> str | None:
        return self.predictions[axis].label

    def batch_record(self) -> dict[str, object]:
        """The stable line of the `predict` batch contract."""
        return {
            "id": self.issue_id,
            "predictions": {axis: self.predictions[axis].model_dump() for axis in AXES},
            "neighbours": [{"id": n.id, "url": n.url, "score": round(n.score, 4)} for n in self.neighbours],
        }
