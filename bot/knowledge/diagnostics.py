"""The diagnostic knowledge base (taxonomy/diagnostics.yaml): failures read from the error's words, a next step each.

`diagnose` is pure text matching: no model, no network. It reads the title and the body line by line (log prefixes
such as `[rank3]:`, `10.0.0.2:` or timestamps removed; bot/reading/textmatch.py bounds the work), honours each entry's
frameworks, and returns at most MAX_DIAGNOSES entries in the file's order (most specific first), without those
they supersede and without fallbacks when anything else fired.
"""

from __future__ import annotations

from datetime import date, datetime
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.core.domain import Diagnosis
from bot.core.errors import ConfigError
from bot.core.paths import shipped_dir
from bot.knowledge.datafile import describe_validation
from bot.knowledge.taxonomy import DIAGNOSTICS_FILE, Taxonomy, load_taxonomy
from bot.reading.normalise import FRAMEWORKS, REPO_FRAMEWORKS
from bot.reading.textmatch import LOG_PREFIX, MAX_LINE_CHARS, LineIndex, LinePattern, clean_lines, compile_pattern

QUESTION_KINDS = frozenset({"usage_question", "documentation"})  # answered by the entries marked `questions: true`
REQUEST_KINDS = frozenset({"feature_request"})  # answered by the entries marked `requests: true`
MAX_DIAGNOSES = 3  # a comment shows one next step; two more at most are context, never a checklist
MAX_MATCHED_CHARS = 200
KNOWN_FRAMEWORKS = frozenset(FRAMEWORKS.values()) | frozenset(REPO_FRAMEWORKS.values())


def _taxonomy(info: ValidationInfo) -> Taxonomy:
    return (info.context or {})["taxonomy"]


def _one_line_text(value: str | None) -> str | None:
    if value is None:
        return None
    if "\n" in value.strip():
        raise ValueError("must be one line")
    return value.strip()


class FrameworkText(BaseModel):
    """An entry's reading or next step as one framework's maintainers would write it: its own flags and APIs only."""

    model_config = ConfigDict(extra="forbid")

    reading: str | None = Field(default=None, min_length=1)
    next_step: str | None = Field(default=None, min_length=1)
    follow_up: str | None = Field(default=None, min_length=1)

    @field_validator("reading", "next_step", "follow_up")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        return _one_line_text(value)

    @model_validator(mode="after")
    def _says_something(self) -> FrameworkText:
        if self.reading is None and self.next_step is None and self.follow_up is None:
            raise ValueError("needs `reading`, `next_step` or `follow_up`")
        return self


class Entry(BaseModel):
    """One recognisable failure: how to detect it and what to do next."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = Field(min_length=1, max_length=60)
    patterns: tuple[str, ...] = ()  # any one, on a line of the title or body
    title_patterns: tuple[str, ...] = ()  # any one, in the title
    requires: tuple[str, ...] = ()  # when given, one of these must also appear on some line
    unless: tuple[str, ...] = ()  # a matched line that also matches one of these does not count
    unless_anywhere: tuple[str, ...] = ()  # a post with a line matching one of these never fires the entry
    frameworks: tuple[str, ...] = ()
    symptoms: tuple[str, ...] = Field(min_length=1)
    stage: str | None = None
    root_cause: str | None = None
    fix_pattern: str | None = None
    reading: str = Field(min_length=1)
    next_step: str = Field(min_length=1)
    ask: str | None = None
    supersedes: tuple[str, ...] = ()
    fallback: bool = False  # shown only when no other entry fires (an exit code that follows the real error)
    # Also read on a usage question or a documentation report: its next step answers a question the frameworks'
    # documentation answers (which launcher flag picks the GPUs, how to resume with another data-parallel size).
    questions: bool = False
    # Also read on a feature request (implies `questions`): its next step is an option that already does what such a
    # request asks for (an uneven pipeline split, variable sequence lengths in a pipeline, a launch without SSH).
    requests: bool = False
    # Optional: the post shows the next step already done (a line matching any one: `CUDA_LAUNCH_BLOCKING=1`
    # set, `py-spy` stacks pasted, the hang located to one call); then `follow_up` is the step shown, or none.
    done_when: tuple[str, ...] = ()
    follow_up: str | None = None
    # The next step is the usual first step of localising this error whatever the report says (rerun with a debug
    # flag, dump the stacks, post the first error line, the generic remedies of an OOM): it rides along with a
    # precedent but is no reason to speak on its own. Its `follow_up`, read from what the post shows, is one.
    localises: bool = False
    # Optional: the day the next step became true (the release that shipped the option, API or fix it names, as the
    # framework's tag dates it). An issue opened before it is not given the entry: the step names what its reporter
    # could not have had (`safe_set_full_fp32_param` on a report of 2023-07, "upgrade to 0.14.5" two months before
    # 0.14.5). An issue of unknown date is read as opened now.
    since: date | None = None
    # Optional, per framework: the reading, next step or follow-up shown on that framework's issues instead of the
    # general ones, so that a DeepSpeed issue is not told Megatron-LM's flags (a step found in several frameworks).
    by_framework: dict[str, FrameworkText] = Field(default_factory=dict)

    _compiled: dict[str, tuple[LinePattern, ...]] = PrivateAttr(default_factory=dict)

    @field_validator("patterns", "title_patterns", "requires", "unless", "unless_anywhere", "done_when")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            compile_pattern(pattern)
        return value

    @field_validator("reading", "next_step", "follow_up")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        return _one_line_text(value)

    @field_validator("frameworks")
    @classmethod
    def _known_frameworks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if unknown := [f for f in value if f not in KNOWN_FRAMEWORKS]:
            raise ValueError(f"{unknown} not among the frameworks the normaliser names: {sorted(KNOWN_FRAMEWORKS)}")
        return value

    @field_validator("by_framework")
    @classmethod
    def _known_framework_keys(cls, value: dict[str, FrameworkText]) -> dict[str, FrameworkText]:
        if unknown := [f for f in value if f not in KNOWN_FRAMEWORKS]:
            raise ValueError(f"{unknown} not among the frameworks the normaliser names: {sorted(KNOWN_FRAMEWORKS)}")
        return value

    @field_validator("symptoms")
    @classmethod
    def _symptoms_in_taxonomy(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return tuple(_in_axis(_taxonomy(info), "symptom", v) for v in value)

    @field_validator("stage", "root_cause", "fix_pattern")
    @classmethod
    def _label_in_taxonomy(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _in_axis(_taxonomy(info), str(info.field_name), value)

    @field_validator("ask")
    @classmethod
    def _fact_in_taxonomy(cls, value: str | None, info: ValidationInfo) -> str | None:
        taxonomy = _taxonomy(info)
        if value is not None and value not in {f.id for f in taxonomy.facts}:
            raise ValueError(f"{value!r} is not a fact of taxonomy {taxonomy.version} (`facts:`)")
        return value

    @model_validator(mode="after")
    def _compile(self) -> Entry:
        if not (self.patterns or self.title_patterns):
            raise ValueError("needs `patterns` or `title_patterns`")
        if self.requests and not self.questions:
            raise ValueError("`requests: true` needs `questions: true`: an option that answers a request answers the "
                             "question how to do it too")
        if self.follow_up and not self.done_when:
            raise ValueError("`follow_up` needs `done_when`: the lines that show the next step already done")
        if self.frameworks and (never := sorted(set(self.by_framework) - set(self.frameworks))):
            raise ValueError(f"by_framework: {never} never read: the entry is limited to {list(self.frameworks)}")
        if any(own.follow_up for own in self.by_framework.values()) and not self.done_when:
            raise ValueError("by_framework: a `follow_up` needs `done_when`: the lines that show the next step done")
        for name in ("patterns", "title_patterns", "requires", "unless", "unless_anywhere", "done_when"):
            self._compiled[name] = tuple(compile_pattern(p) for p in getattr(self, name))
        return self

    def match(self, title: str, index: LineIndex) -> str | None:
        """The first line that shows this failure, or None."""
        found = self._first(self._compiled["title_patterns"], [title]) or self._first(self._compiled["patterns"], index)
        if found is None or any(index.matching_lines(p) for p in self._compiled["unless_anywhere"]):
            return None
        if not self.requires:
            return found
        return found if any(index.matching_lines(p) for p in self._compiled["requires"]) else None

    def _first(self, patterns: tuple[LinePattern, ...], where: LineIndex | list[str]) -> str | None:
        for pattern in patterns:
            lines = where.candidates(pattern) if isinstance(where, LineIndex) else where
            for line in lines:
                if pattern.regex.search(line) and not any(u.regex.search(line) for u in self._compiled["unless"]):
                    return line
        return None

    def holds_on(self, opened: datetime | date | None) -> bool:
        """Whether the next step existed when the issue was opened (always, for an undated issue or entry)."""
        if self.since is None or opened is None:
            return True
        return (opened.date() if isinstance(opened, datetime) else opened) >= self.since

    def shows_done(self, index: LineIndex) -> bool:
        """Whether the post shows this entry's next step already done (a line matching `done_when`)."""
        return any(index.matching_lines(p) for p in self._compiled["done_when"])

    def diagnosis(self, matched: str, done: bool = False, title: str = "", framework: str | None = None) -> Diagnosis:
        own = self.by_framework.get(framework or "")
        return Diagnosis(id=self.id, title=self.title, reading=(own and own.reading) or self.reading,
                         next_step=(own and own.next_step) or self.next_step,
                         symptoms=list(self.symptoms), stage=self.stage, root_cause=self.root_cause,
                         fix_pattern=self.fix_pattern, ask=self.ask, matched=matched[:MAX_MATCHED_CHARS],
                         done=done, follow_up=(own and own.follow_up) or self.follow_up,
                         playbook=self.is_playbook(matched, title),
                         localises=self.localises)

    def is_playbook(self, matched: str, title: str) -> bool:
        """Whether the match is the title's words alone: a `title_patterns` hit with no `requires` evidence. An
        answer to a question is never one: the title is the question, and the step is the documented answer."""
        return (not self.requires and not self.questions and matched == title
                and self._first(self._compiled["title_patterns"], [title]) is not None)


def _in_axis(taxonomy: Taxonomy, axis: str, value: str) -> str:
    if value not in taxonomy.ids(axis):
        raise ValueError(f"{value!r} is not a {axis} of taxonomy {taxonomy.version}")
    return value


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    taxonomy: str
    entries: list[dict[str, Any]] = Field(min_length=1)


class KnowledgeBase(BaseModel):
    """The validated file: its version, the taxonomy its ids belong to, and the entries in rank order."""

    version: str
    taxonomy: str
    entries: tuple[Entry, ...]

    def entry(self, entry_id: str) -> Entry:
        return next(e for e in self.entries if e.id == entry_id)

    def fired(self, title: str, body: str, framework: str | None) -> list[tuple[Entry, str]]:
        """Every entry for this framework that detects its failure, in file order, with the line it matched."""
        return [(entry, line) for entry, line, _ in self.read(title, body, framework)]

    def read(self, title: str, body: str, framework: str | None) -> list[tuple[Entry, str, bool]]:
        """`fired`, each with whether the post shows its next step already done."""
        title_line = LOG_PREFIX.sub("", (title or "")[:MAX_LINE_CHARS]).strip()
        index = LineIndex(clean_lines(title or "", body or ""))
        hits: list[tuple[Entry, str, bool]] = []
        for entry in self.entries:
            if entry.frameworks and framework not in entry.frameworks:
                continue
            if (line := entry.match(title_line, index)) is not None:
                hits.append((entry, line, entry.shows_done(index)))
        return hits


def load_diagnostics_file(path: Path) -> KnowledgeBase:
    """Load and validate one knowledge-base file; every problem names the file, the entry and the field."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: diagnostics file not found") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read as YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: invalid diagnostics file: it must be a mapping with version, taxonomy, entries")
    try:
        top = _File.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid diagnostics file: {describe_validation(exc)}") from None
    taxonomy = load_taxonomy(top.taxonomy)
    entries: list[Entry] = []
    for index, item in enumerate(top.entries):
        name = f"entry {item.get('id')!r} (entries[{index}])" if isinstance(item, dict) else f"entries[{index}]"
        try:
            entries.append(Entry.model_validate(item, context={"taxonomy": taxonomy}))
        except ValidationError as exc:
            raise ConfigError(f"{path}: {name}: {describe_validation(exc)}") from None
    _check_references(path, entries)
    return KnowledgeBase(version=top.version, taxonomy=top.taxonomy, entries=tuple(entries))


def _check_references(path: Path, entries: list[Entry]) -> None:
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.id in seen:
            raise ConfigError(f"{path}: entry {entry.id!r} (entries[{index}]): id: duplicate id")
        seen.add(entry.id)
    for index, entry in enumerate(entries):
        for other in entry.supersedes:
            if other not in seen or other == entry.id:
                raise ConfigError(f"{path}: entry {entry.id!r} (entries[{index}]): supersedes: {other!r} is not "
                                  "another entry of this file")


def diagnostics_path() -> Path:
    return shipped_dir("taxonomy") / DIAGNOSTICS_FILE


@cache
def load_diagnostics(path: str | None = None) -> KnowledgeBase:
    """The shipped knowledge base (or the file at `path`), loaded and validated once per process."""
    return load_diagnostics_file(Path(path) if path else diagnostics_path())


def diagnose(title: str, body: str, *, framework: str | None, kind: str | None,
             base: KnowledgeBase | None = None, opened: datetime | date | None = None) -> list[Diagnosis]:
    """The failures the knowledge base recognises in an issue, most specific first.
    `framework` is the repository's or the text's (EnvironmentFacts.framework); an entry limited
    to some frameworks stays silent for another one, and when the framework is unknown (None).
    A usage question or a documentation report gets only the entries that answer questions (`questions: true`), a
    feature request only those whose step is an option that already does what it asks for (`requests: true`).
    `opened` is when the issue was opened: an entry whose step came later (`since`) stays silent on it, and an entry
    it would have superseded speaks instead."""
    hits = [hit for hit in (base or load_diagnostics()).read(title, body, framework) if hit[0].holds_on(opened)]
    if kind in QUESTION_KINDS:
        hits = [hit for hit in hits if hit[0].questions]
    elif kind in REQUEST_KINDS:
        hits = [hit for hit in hits if hit[0].requests]
    superseded = {other for entry, _, _ in hits for other in entry.supersedes}
    # A fallback gives way to another entry that stays, not to one it supersedes itself (a warning that explains
    # the hang a title reports supersedes the title's generic reading, and must not vanish with it).
    if any(not entry.fallback and entry.id not in superseded for entry, _, _ in hits):
        superseded |= {entry.id for entry, _, _ in hits if entry.fallback}
    title_line = LOG_PREFIX.sub("", (title or "")[:MAX_LINE_CHARS]).strip()
    return [entry.diagnosis(line, done, title_line, framework) for entry, line, done in hits
            if entry.id not in superseded][:MAX_DIAGNOSES]
