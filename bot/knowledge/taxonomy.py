"""Taxonomies as versioned data: loaded from YAML and validated with pydantic."""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from bot.core.errors import ConfigError
from bot.core.paths import shipped_dir
from bot.knowledge.datafile import load_yaml_model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Value(_Strict):
    id: str
    title: str | None = None  # the label in words, as the comment shows it (ids stay in the marker and the JSON)
    definition: str | None = None
    group: str | None = None
    provenance: tuple[str, ...] = ()
    checklist: tuple[str, ...] = ()
    maps_to: str | None = None
    aliases: tuple[str, ...] = ()
    ask_for: tuple[str, ...] = ()  # ids of `facts` a report of this value needs (symptoms)


class Fact(_Strict):
    """Something a reporter should give; asked for only when none of `present` matches the issue text."""

    id: str
    ask: str  # names no project's own command: the wording for a project without one
    ask_by_framework: dict[str, str] = {}  # the project's own words (DeepSpeed: `ds_report`), by framework name
    present: tuple[str, ...] = ()  # case-insensitive regular expressions; any match means the fact is there
    environment: tuple[str, ...] = ()  # EnvironmentFacts fields that, when extracted, also mean it is there
    all_of: tuple[str, ...] = ()  # facts that, all present, mean this one is (versions: torch, CUDA, framework)
    all_of_by_framework: dict[str, tuple[str, ...]] = {}  # `all_of` for one framework (Megatron-LM: commit, TE)
    not_for: tuple[str, ...] = ()  # symptoms for which this fact is never asked (a launch command for a build)
    asked_when: tuple[str, ...] = ()  # asked only when one of these matches (a traceback: the text says it fails)
    # A section heading naming the fact ("ds_report output", "NCCL log") followed by a screenshot or a collapsed
    # <details> block shows it: these patterns are searched in the heading's words (bot/knowledge/facts.py).
    headings: tuple[str, ...] = ()
    not_for_stages: tuple[str, ...] = ()  # stages for which it is never asked (training settings on inference)
    environment_only: bool = False  # describes the installation: never asked of a report comparing two settings

    def ask_for(self, framework: str | None) -> str:
        """The ask in the project's own words where it has some, else the plain wording."""
        return self.ask_by_framework.get(framework or "", self.ask)

    def parts(self, framework: str | None) -> tuple[str, ...]:
        return self.all_of_by_framework.get(framework or "", self.all_of)

    @model_validator(mode="after")
    def _patterns_compile(self) -> Fact:
        for pattern in (*self.present, *self.asked_when, *self.headings):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"facts.{self.id}: present pattern {pattern!r} does not compile ({exc})") from None
        return self


class Axis(_Strict):
    description: str
    values: tuple[Value, ...]

    @model_validator(mode="after")
    def _unique_ids(self) -> Axis:
        seen: set[str] = set()
        for value in self.values:
            for name in (value.id, *value.aliases):
                if name in seen:
                    raise ValueError(f"duplicate id {name!r}")
                seen.add(name)
        return self

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(v.id for v in self.values)


class Taxonomy(_Strict):
    version: str
    title: str
    sources: dict[str, str] = {}
    maps_onto: str | None = None
    not_established: dict[str, tuple[str, ...]] = {}
    facts: tuple[Fact, ...] = ()
    ask_for_any_bug: tuple[str, ...] = ()  # facts every bug report needs, whatever its symptom
    axes: dict[str, Axis]

    @model_validator(mode="after")
    def _references_resolve(self) -> Taxonomy:
        for axis_name, axis in self.axes.items():
            for value in axis.values:
                for source in value.provenance:
                    if source not in self.sources:
                        raise ValueError(f"axes.{axis_name}.{value.id}: provenance {source!r} is not in sources")
        fact_ids = {f.id for f in self.facts}
        for axis_name, axis in self.axes.items():
            for value in axis.values:
                for fact in value.ask_for:
                    if fact not in fact_ids:
                        raise ValueError(f"axes.{axis_name}.{value.id}: ask_for {fact!r} is not in facts")
        for entry in self.facts:
            for part in (*entry.all_of, *(p for parts in entry.all_of_by_framework.values() for p in parts)):
                if part not in fact_ids or part == entry.id:
                    raise ValueError(f"facts.{entry.id}: all_of {part!r} is not another fact")
            for symptom in entry.not_for:
                if "symptom" in self.axes and symptom not in self.axes["symptom"].ids:
                    raise ValueError(f"facts.{entry.id}: not_for {symptom!r} is not a symptom")
            for stage in entry.not_for_stages:
                if "stage" in self.axes and stage not in self.axes["stage"].ids:
                    raise ValueError(f"facts.{entry.id}: not_for_stages {stage!r} is not a stage")
        for fact in self.ask_for_any_bug:
            if fact not in fact_ids:
                raise ValueError(f"ask_for_any_bug: {fact!r} is not in facts")
        for axis_name, ids in self.not_established.items():
            if axis_name not in self.axes:
                raise ValueError(f"not_established names unknown axis {axis_name!r}")
            for value_id in ids:
                if value_id not in self.axes[axis_name].ids:
                    raise ValueError(f"not_established.{axis_name}: {value_id!r} is not a value of that axis")
        return self

    def axis(self, name: str) -> Axis:
        try:
            return self.axes[name]
        except KeyError:
            raise ConfigError(f"taxonomy {self.version} has no axis {name!r}; it has {list(self.axes)}") from None

    def ids(self, axis: str) -> tuple[str, ...]:
        return self.axis(axis).ids

    def value(self, axis: str, value_id: str) -> Value:
        for value in self.axis(axis).values:
            if value_id == value.id or value_id in value.aliases:
                return value
        raise ConfigError(f"{value_id!r} is not a {axis} of taxonomy {self.version}")

    def canonical(self, axis: str, value_id: str) -> str | None:
        """The id that `value_id` (an id or an alias) names, or None when it is not in the axis."""
        for value in self.axis(axis).values:
            if value_id == value.id or value_id in value.aliases:
                return value.id
        return None

    def labels_digest(self) -> str:
        """sha256 of what shapes a fitted model: the version and every axis's ids, aliases, definitions and
        mappings. Titles, facts and asks are the comment's wording: editing them keeps packs and fits valid."""
        shape = {"version": self.version, "not_established": self.not_established, "maps_onto": self.maps_onto,
                 "axes": {name: [(v.id, v.aliases, v.definition, v.maps_to, v.group) for v in axis.values]
                          for name, axis in self.axes.items()}}
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()

    def words(self, axis: str, value_id: str) -> str:
        """A label in words: its `title`, else its id with spaces."""
        value = self.value(axis, value_id)
        return value.title or value.id.replace("_", " ")

    def fact(self, fact_id: str) -> Fact:
        return next(f for f in self.facts if f.id == fact_id)

    def predictable(self, axis: str) -> tuple[str, ...]:
        """The values a predictor may output: all but the 'not established' markers."""
        skip = set(self.not_established.get(axis, ()))
        return tuple(i for i in self.ids(axis) if i not in skip)

    def is_established(self, axis: str, value_id: str | None) -> bool:
        return value_id is not None and value_id not in self.not_established.get(axis, ())


DIAGNOSTICS_FILE = "diagnostics.yaml"  # shipped beside the taxonomies; a knowledge base (knowledge/diagnostics.py)


def taxonomy_files() -> list[Path]:
    """The shipped taxonomy files (taxonomy/*.yaml but the diagnostic knowledge base)."""
    return sorted(p for p in shipped_dir("taxonomy").glob("*.yaml") if p.name != DIAGNOSTICS_FILE)


def taxonomy_path(name: str) -> Path:
    """A shipped taxonomy by version name (`ddl-v1`, `liu23`) or a path to a YAML file."""
    candidate = Path(name)
    if candidate.suffix in {".yaml", ".yml"}:
        return candidate
    return shipped_dir("taxonomy") / f"{name}.yaml"


def load_taxonomy_file(path: Path) -> Taxonomy:
    """Load and validate one taxonomy file; every problem names the file and the entry."""
    if not path.is_file():
        shipped = [p.stem for p in taxonomy_files()]
        raise ConfigError(f"{path}: taxonomy file not found; shipped taxonomies: {shipped}")
    taxonomy = load_yaml_model(path, Taxonomy, "taxonomy")
    if taxonomy.maps_onto:
        _check_mapping(path, taxonomy, load_taxonomy(taxonomy.maps_onto))
    return taxonomy


def _check_mapping(path: Path, taxonomy: Taxonomy, target: Taxonomy) -> None:
    for axis_name, axis in taxonomy.axes.items():
        for value in axis.values:
            if value.maps_to is None:
                continue
            if axis_name not in target.axes or value.maps_to not in target.ids(axis_name):
                raise ConfigError(f"{path}: axes.{axis_name}.{value.id}: maps_to {value.maps_to!r} is not a "
                                  f"{axis_name} of {target.version}")


@cache
def load_taxonomy(name: str = "ddl-v1") -> Taxonomy:
    """A taxonomy by version name or path, loaded once per process."""
    return load_taxonomy_file(taxonomy_path(name))
