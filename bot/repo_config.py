"""Per-repository config `.github/ddl-triage.yml`: validated, and never a reason for the bot to stop. What it
says, not how it is read (the service's handlers read it as the installation: `handlers/config_file.py`)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from bot.comment.policy import CommentMode, CommentPolicy
from bot.datafile import parse_yaml_model
from bot.domain import TriageResult
from bot.errors import ConfigError
from bot.settings import AXES, Settings
from bot.taxonomy import Taxonomy

log = logging.getLogger(__name__)

CONFIG_PATH = ".github/ddl-triage.yml"
DEFAULT_LABEL = "{axis}:{value}"


def _known_axes(axes: list[str] | tuple[str, ...] | dict[str, Any]) -> None:
    unknown = sorted(set(axes) - set(AXES))
    if unknown:
        raise ValueError(f"unknown axes {unknown}; the axes are {list(AXES)}")


class LabelConfig(BaseModel):
    """Labels are off unless enabled; only names that already exist in the repository are ever added."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    axes: tuple[str, ...] = ("kind", "symptom")
    names: dict[str, dict[str, str]] = Field(default_factory=dict)

    @field_validator("axes")
    @classmethod
    def _axes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _known_axes(value)
        return value

    @field_validator("names")
    @classmethod
    def _names(cls, value: dict[str, dict[str, str]], info: ValidationInfo) -> dict[str, dict[str, str]]:
        _known_axes(value)
        taxonomy = info.context.get("taxonomy") if isinstance(info.context, dict) else None
        if taxonomy is not None:
            for axis, mapping in value.items():
                unknown = sorted(v for v in mapping if taxonomy.canonical(axis, v) is None)
                if unknown:
                    raise ValueError(f"{unknown} are not {axis} values of taxonomy {taxonomy.version}")
        return value

    def name(self, axis: str, value: str) -> str:
        return self.names.get(axis, {}).get(value) or DEFAULT_LABEL.format(axis=axis, value=value)


class RepoConfig(BaseModel):
    """What one repository asks of the bot; every field has a default, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    axes: tuple[str, ...] = AXES
    thresholds: dict[str, float] = Field(default_factory=dict)
    labels: LabelConfig = LabelConfig()
    shadow: bool = False
    comment: CommentMode = "useful"  # useful: only when it adds something beyond labels; always; never
    comment_on_members: bool = False  # also comment on issues opened by the owner, members or collaborators
    comment_labels: bool = False  # the labels in words in the comment ("**Likely:** ..."); off: labels route

    @field_validator("axes")
    @classmethod
    def _axes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _known_axes(value)
        return tuple(axis for axis in AXES if axis in value)  # the comment keeps the taxonomy's order

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, value: dict[str, float]) -> dict[str, float]:
        _known_axes(value)
        outside = sorted(axis for axis, t in value.items() if not 0.0 <= t <= 1.0)
        if outside:
            raise ValueError(f"thresholds of {outside} must lie between 0 and 1")
        return value

    def comment_policy(self, settings: Settings) -> CommentPolicy:
        """When and what the bot comments here: this file's choices over the service's floors."""
        return CommentPolicy.from_settings(settings, comment=self.comment, comment_on_members=self.comment_on_members,
                                           comment_labels=self.comment_labels, axes=self.axes)


def parse_repo_config(text: str | None, taxonomy: Taxonomy, where: str = CONFIG_PATH) -> RepoConfig:
    """The config in `text`; a missing file gives the defaults, a bad one the defaults and a log line."""
    if text is None:
        return RepoConfig()
    try:
        return parse_yaml_model(text, RepoConfig, where, "config", context={"taxonomy": taxonomy})
    except ConfigError as exc:
        log.warning("%s is invalid, using the defaults: %s", where, str(exc).removeprefix(f"{where}: "))
        return RepoConfig()


def label_names(config: RepoConfig, result: TriageResult) -> list[str]:
    """The label names the result maps to under the repository's config (empty when labels are off)."""
    if not config.labels.enabled:
        return []
    return [config.labels.name(axis, label) for axis in config.labels.axes
            if (label := result.predictions[axis].label) is not None]
