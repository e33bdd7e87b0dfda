"""The domain's error tree. Each boundary (CLI, HTTP, worker) translates these once."""

from __future__ import annotations


class TriageError(Exception):
    """Base of every error ddl-triage raises on purpose; its message tells the user what to do."""


class ConfigError(TriageError):
    """A setting, a config file or a shipped data file is missing or invalid."""


class DataError(TriageError):
    """A dataset or input line cannot be used; names the file, line and field."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None, kept: bool = False) -> None:
        where = ":".join(str(p) for p in (path, line) if p is not None)
        prefix = f"{where}: " if where else ""
        suffix = f" (field {field!r})" if field else ""
        super().__init__(f"{prefix}{message}{suffix}")
        self.path, self.line, self.field = path, line, field
        self.kept = kept  # a warning about a line that was still used, not a line that was skipped


class PredictorError(TriageError):
    """A predictor or model backend cannot be built or used."""


class LLMOutputError(PredictorError):
    """An LLM answer that is not valid JSON or names labels outside the taxonomy."""
