"""Versioned YAML data (taxonomies, prompts, benchmark and repository configs) validated by pydantic models."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from bot.core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def describe_validation(exc: ValidationError) -> str:
    """Every problem as `dotted.field: message`, joined in one line."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '<top>'}: {err['msg']}" for err in exc.errors())


def parse_yaml_model(text: str, model: type[M], source: str, what: str,
                     context: dict[str, Any] | None = None) -> M:
    """`text` as YAML validated into `model`; any problem is a ConfigError naming `source` and the field."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {' '.join(str(exc).split())}") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"{source}: invalid {what}: the file must be a mapping")
    try:
        return model.model_validate(raw or {}, context=context)
    except ValidationError as exc:
        raise ConfigError(f"{source}: invalid {what}: {describe_validation(exc)}") from None


def load_yaml_model(path: Path, model: type[M], what: str) -> M:
    """A YAML file validated into `model`; a missing or unreadable file is a ConfigError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_yaml_model(text, model, str(path), what)
