"""Prompt templates as versioned data: strict about their variables, validated on load."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

from pydantic import BaseModel, ConfigDict, model_validator

from bot.core.errors import ConfigError
from bot.core.paths import shipped_dir
from bot.knowledge.datafile import load_yaml_model


class PromptTemplate(BaseModel):
    """A system message, a user message and a retry message with $placeholders."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    variables: tuple[str, ...]
    system: str
    user: str
    retry: str

    @model_validator(mode="after")
    def _placeholders_declared(self) -> PromptTemplate:
        used = set(Template(self.system).get_identifiers()) | set(Template(self.user).get_identifiers())
        declared = set(self.variables)
        if used != declared:
            raise ValueError(f"placeholders {sorted(used)} differ from variables {sorted(declared)}")
        return self

    def render(self, **values: str) -> tuple[str, str]:
        """(system, user) messages; a missing or unexpected variable is an error naming it."""
        missing = set(self.variables) - set(values)
        extra = set(values) - set(self.variables)
        if missing or extra:
            raise ConfigError(f"prompt {self.version}: missing variables {sorted(missing)}, "
                              f"unexpected {sorted(extra)}")
        return Template(self.system).substitute(values), Template(self.user).substitute(values)

    def render_retry(self, error: str, answer_keys: str) -> str:
        return Template(self.retry).substitute(error=error, answer_keys=answer_keys)


def prompt_path(name: str) -> Path:
    candidate = Path(name)
    return candidate if candidate.suffix in {".yaml", ".yml"} else shipped_dir("prompts") / f"{name}.yaml"


@cache
def load_prompt(name: str = "triage-v1") -> PromptTemplate:
    """A shipped prompt by version name, or a YAML file path."""
    return load_yaml_model(prompt_path(name), PromptTemplate, "prompt")
