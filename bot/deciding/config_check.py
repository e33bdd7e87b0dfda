"""A repository config checked before it is committed: each problem with its line and key, and the labels its
mapping can add. The same model the service validates with (`bot/deciding/repo_config.py`), so what passes here is what
the service reads."""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from pydantic import ValidationError

from bot.deciding.repo_config import RepoConfig
from bot.knowledge.taxonomy import Taxonomy

LABEL_COLOURS = {"kind": "1d76db", "stage": "5319e7", "symptom": "d93f0b", "root_cause": "b60205",
                 "fix_pattern": "0e8a16"}
GITHUB_DESCRIPTION_MAX = 100  # characters GitHub accepts in a label's description


@dataclass(frozen=True)
class Problem:
    line: int | None  # 1-based; None when the file has no line for it
    key: str  # the dotted key (`thresholds.symptom`, `labels.names.kind`), or "" for the whole file
    message: str

    def format(self, where: str) -> str:
        place = f"{where}:{self.line}" if self.line else where
        return f"{place}: {self.key}: {self.message}" if self.key else f"{place}: {self.message}"


@dataclass(frozen=True)
class WantedLabel:
    name: str
    axis: str
    value: str
    colour: str
    description: str


def check_config(text: str, taxonomy: Taxonomy) -> tuple[RepoConfig | None, list[Problem]]:
    """The config and no problem, or None and every problem found."""
    try:
        raw = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [Problem(mark.line + 1 if mark else None, "", f"not valid YAML: {' '.join(str(exc).split())}")]
    if raw is not None and not isinstance(raw, dict):
        return None, [Problem(1, "", "the file must be a mapping of keys (enabled, axes, thresholds, labels, ...)")]
    try:
        return RepoConfig.model_validate(raw or {}, context={"taxonomy": taxonomy}), []
    except ValidationError as exc:
        problems = [Problem(line_of(root, err["loc"]), ".".join(str(p) for p in err["loc"]), err["msg"])
                    for err in exc.errors()]
        return None, sorted(problems, key=lambda p: p.line or 0)


def line_of(node: yaml.Node | None, path: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the deepest node of `path` the document holds (a key's own line when it is there)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if found is None:
                return line
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def wanted_labels(config: RepoConfig, taxonomy: Taxonomy) -> list[WantedLabel]:
    """Every label the bot may add under `config`: each value of each labelled axis, by its mapped name."""
    labels: dict[str, WantedLabel] = {}
    for axis in config.labels.axes:
        for value in taxonomy.predictable(axis):
            name = config.labels.name(axis, value)
            definition = " ".join((taxonomy.value(axis, value).definition or "").split())
            description = f"ddl-triage {axis}: {definition}" if definition else f"ddl-triage {axis}: {value}"
            labels.setdefault(name.casefold(), WantedLabel(name, axis, value, LABEL_COLOURS.get(axis, "ededed"),
                                                           shorten(description, GITHUB_DESCRIPTION_MAX)))
    return list(labels.values())


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
