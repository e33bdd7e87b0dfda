"""Domain types shared by the engine, the CLI, the service and the benchmarks."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.core.settings import AXES

Labels = dict[str, str | None]


class Issue(BaseModel):
    """An issue to triage: what the engine needs, nothing GitHub-specific."""

    id: str = "issue"
    title: str = ""
    body: str = ""
    repo: str | None = None
    number: int | None = None
    url: str | None = None
    # When the issue was opened (UTC; a bare date is midnight UTC). Given, only cases opened before it are
    # retrieved, shown or voting: the App never sees the future.
    created_at: datetime | None = None

    @field_validator("created_at")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)


class Case(Issue):
    """A labelled issue of the case base (a gold record)."""

    model_config = ConfigDict(extra="ignore")

    source_file: str = ""
    type: str | None = None
    state: str | None = None
    labels: Labels = Field(default_factory=dict)
    silver: Labels = Field(default_factory=dict)
    native: dict[str, object] | None = None
    annotation: dict[str, object] | None = None  # how the gold record was labelled (e.g. resolution_visible)


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


class ErrorSignature(BaseModel):
    """One failure a report shows, canonicalised so that the same failure in two reports reads the same:
    numbers, sizes, ranks, paths, addresses and hex replaced by placeholders (bot/reading/signatures.py)."""

    model_config = ConfigDict(frozen=True)

    kind: str  # exception | assertion | cuda | nccl | exit_code | signal | no_kernel_image | missing_module | ...
    text: str  # the canonical form, e.g. "RuntimeError: The size of tensor a (<N>) must match ..."
    digest: str  # a hash of kind and text: what the case pack and the repository memory index


class Diagnosis(BaseModel):
    """A failure the diagnostic knowledge base (taxonomy/diagnostics.yaml) recognises in the issue."""

    id: str
    title: str
    reading: str  # one line: what the error means
    next_step: str  # one line: the specific next step
    symptoms: list[str] = Field(default_factory=list)  # the ddl-v1 symptoms it implies
    stage: str | None = None
    root_cause: str | None = None  # set only where the entry itself establishes it
    fix_pattern: str | None = None
    ask: str | None = None  # a fact id (taxonomy `facts:`) the next step needs, asked for when the text lacks it
    matched: str = ""  # the text that matched, one line
    done: bool = False  # the post shows `next_step` already done (the entry's `done_when`)
    follow_up: str | None = None  # the step after it, shown instead when `done`
    # Read from the title's words alone (a hang, low throughput) with nothing in the post backing it: a playbook,
    # not a reading of this report. It rides along with a precedent but is no reason to speak on its own.
    playbook: bool = False
    # The entry's step is the usual first step of localising the error, the same for every report of it (the
    # knowledge base's `localises`): like a playbook, it rides along but is no reason to speak on its own.
    localises: bool = False


class AxisPrediction(BaseModel):
    """One axis: the shown label (None when abstaining), its calibrated confidence and the ranking head."""

    label: str | None
    confidence: float
    top: list[tuple[str, float]]
    corrected: bool = False  # set by a maintainer's `/triage axis=value`, not predicted


class Neighbour(BaseModel):
    """A labelled case of the pack near the issue. Title and state are GitHub's, filled in only by the service."""

    id: str
    url: str | None
    title: str | None = None
    type: str | None = None  # "issue" | "pull_request" | "question"
    state: str | None = None
    score: float
    labels: Labels = Field(default_factory=dict)
    signature: str | None = None  # the canonical error signature it shares with the issue, when it does
    created_at: datetime | None = None  # when it was opened (UTC), where the pack or GitHub says

    @property
    def is_pull_request(self) -> bool:
        return self.type == "pull_request"


class RelatedIssue(BaseModel):
    """An issue or pull request of the same repository, from the repository memory (service only)."""

    repo: str
    number: int
    url: str | None = None
    title: str | None = None
    type: str = "issue"  # "issue" | "pull_request"
    state: str = "open"
    state_reason: str | None = None  # completed | not_planned | duplicate
    closed_by: str | None = None  # "#4290" or a commit sha
    duplicate_of: int | None = None
    labels: list[str] = Field(default_factory=list)
    score: float
    possible_duplicate: bool = False
    signature: str | None = None  # the canonical error signature it shares with the issue, when it does
    released_in: str | None = None  # the release that carried its fix, when known
    created_at: datetime | None = None  # when it was opened (UTC), from the memory


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
    related: list[RelatedIssue] = Field(default_factory=list)  # this repository's own issues (service only)
    repo_labels: list[tuple[str, float]] = Field(default_factory=list)  # the repository's own labels it suggests
    needs_details: bool = False  # too little text to triage: the comment asks for the facts instead
    missing_facts: list[str] = Field(default_factory=list)  # ids of facts to ask for (taxonomy `facts:`)
    signatures: list[ErrorSignature] = Field(default_factory=list)  # the failures the report shows
    diagnoses: list[Diagnosis] = Field(default_factory=list)  # what the diagnostic knowledge base recognises

    def label(self, axis: str) -> str | None:
        return self.predictions[axis].label

    def batch_record(self) -> dict[str, object]:
        """The stable line of the `predict` batch contract."""
        return {
            "id": self.issue_id,
            "predictions": {axis: self.predictions[axis].model_dump(include={"label", "confidence", "top"})
                            for axis in AXES},
            "neighbours": [{"id": n.id, "url": n.url, "score": round(n.score, 4)} for n in self.neighbours],
        }
