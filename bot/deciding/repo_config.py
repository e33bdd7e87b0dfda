"""Per-repository config `.github/ddl-triage.yml`, validated. A file that does not validate is an error that names
each key and its line (`RepoConfigError`): the service then does nothing in that repository until it is fixed
(fail closed), except that `enabled: false`, read leniently first, always turns the bot off. What it says, not
how it is read (the service's handlers read it as the installation: `handlers/config_file.py`)."""

from __future__ import annotations

import logging
import re
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from bot.comment.policy import CommentMode, CommentPolicy
from bot.core.domain import TriageResult
from bot.core.errors import ConfigError
from bot.core.settings import AXES, Settings
from bot.knowledge.taxonomy import Taxonomy

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


class RepoConfigError(ConfigError):
    """A repository's config that cannot be read or does not validate: nothing is done there until it is fixed.
    `where` names the file, `problem` what is wrong (each key with its line)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


# `enabled: false` (or no / off, YAML 1.1's false) at the top level of a file that is not even valid YAML.
_DISABLED_LINE = re.compile(r"^enabled[ \t]*:[ \t]*(?:false|no|off)[ \t]*(?:#.*)?$", re.IGNORECASE | re.MULTILINE)


def parse_repo_config(text: str | None, taxonomy: Taxonomy, where: str = CONFIG_PATH) -> RepoConfig:
    """The config in `text`: the defaults for a missing (None) or empty file; `enabled: false` wins over every
    other key, valid or not; any other problem is a RepoConfigError naming each key and line."""
    if text is None:
        return RepoConfig()
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        if _DISABLED_LINE.search(text):
            return _disabled_despite(where, "it is not valid YAML")
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise RepoConfigError(where, f"not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    if raw is not None and not isinstance(raw, dict):
        raise RepoConfigError(where, "the file must be a mapping of keys (enabled, axes, labels, ...)")
    raw = raw or {}
    try:
        return RepoConfig.model_validate(raw, context={"taxonomy": taxonomy})
    except ValidationError as exc:
        if raw.get("enabled") is False:
            return _disabled_despite(where, "other keys are invalid")
        lines = key_lines(text)
        raise RepoConfigError(where, "invalid config: " + "; ".join(
            _problem(err["loc"], err["msg"], lines) for err in exc.errors())) from None


def _disabled_despite(where: str, why: str) -> RepoConfig:
    log.info("%s says enabled: false; the bot stays off there (%s)", where, why)
    return RepoConfig(enabled=False)


def _problem(loc: tuple[int | str, ...], message: str, lines: dict[tuple[str, ...], int]) -> str:
    """`key.sub: message (line N)`, the line of the deepest key of `loc` that the file has."""
    path = tuple(str(p) for p in loc)
    line = next((lines[path[:n]] for n in range(len(path), 0, -1) if path[:n] in lines), None)
    return f"{'.'.join(path) or '<top>'}: {message}" + (f" (line {line})" if line else "")


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The 1-based line of every mapping key of a YAML document, by its path of keys."""
    found: dict[tuple[str, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*path, str(key.value))
                found.setdefault(sub, key.start_mark.line + 1)
                walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                found.setdefault((*path, str(i)), item.start_mark.line + 1)
                walk(item, (*path, str(i)))

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return found
    if root is not None:
        walk(root, ())
    return found


def label_names(config: RepoConfig, result: TriageResult) -> list[str]:
    """The label names the result maps to under the repository's config (empty when labels are off)."""
    if not config.labels.enabled:
        return []
    return [config.labels.name(axis, label) for axis in config.labels.axes
            if (label := result.predictions[axis].label) is not None]
