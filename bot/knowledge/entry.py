"""One entry of the diagnostic knowledge base (taxonomy/diagnostics.yaml): its fields, their validation against the
taxonomy, how it matches a post, and the `Diagnosis` it gives, in the issue's framework's own words (`by_framework`, and
the clauses of bot/knowledge/clauses.py that hold for one framework or from one day).
bot/knowledge/diagnostics.py loads the file and reads a post with every entry."""

from __future__ import annotations

from collections.abc import Collection
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from bot.core.domain import Diagnosis
from bot.knowledge import clauses
from bot.knowledge.taxonomy import Taxonomy
from bot.reading.normalise import FRAMEWORKS, REPO_FRAMEWORKS
from bot.reading.textmatch import LineIndex, LinePattern, compile_pattern

MAX_MATCHED_CHARS = 200
TEXTS = ("reading", "next_step", "follow_up")  # what an issue reads: general, per framework, with clauses
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

    @field_validator("frameworks", "by_framework")
    @classmethod
    def _known_frameworks(cls, value: Any) -> Any:
        # a tuple of names, or a mapping keyed by them: iterating either gives the names
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
        for name in TEXTS:
            self._check_clauses(name)
        for name in ("patterns", "title_patterns", "requires", "unless", "unless_anywhere", "done_when"):
            self._compiled[name] = tuple(compile_pattern(p) for p in getattr(self, name))
        return self

    def _check_clauses(self, name: str) -> None:
        """The clauses of text `name` (bot/knowledge/clauses.py), general and per framework; none may be dead."""
        if text := getattr(self, name):
            _clauses_of(name, text, self.frameworks or KNOWN_FRAMEWORKS)
            if dead := sorted(f for f, own in self.by_framework.items()
                              if getattr(own, name) and f in clauses.only_frameworks(text)):
                raise ValueError(f"{name}: an `<only {dead[0]}>` clause is never read: "
                                 f"`by_framework.{dead[0]}.{name}` replaces the whole text on its issues")
        for framework, own in self.by_framework.items():
            if text := getattr(own, name):
                _clauses_of(f"by_framework.{framework}.{name}", text, {framework}, general=False)

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
        day = _day(opened)
        return self.since is None or day is None or day >= self.since

    def shows_done(self, index: LineIndex) -> bool:
        """Whether the post shows this entry's next step already done (a line matching `done_when`)."""
        return any(index.matching_lines(p) for p in self._compiled["done_when"])

    def diagnosis(self, matched: str, done: bool = False, title: str = "", framework: str | None = None,
                  opened: datetime | date | None = None) -> Diagnosis:
        """The diagnosis an issue of `framework` opened on `opened` gets: that framework's own text where the entry
        has one, and of each text the clauses that hold for that framework and day."""
        own = self.by_framework.get(framework or "")
        day = _day(opened)
        shown = {name: (own and getattr(own, name)) or getattr(self, name) for name in TEXTS}
        reading, next_step, follow_up = (text and clauses.render(text, framework, day) for text in shown.values())
        return Diagnosis(id=self.id, title=self.title, reading=reading, next_step=next_step,
                         symptoms=list(self.symptoms), stage=self.stage, root_cause=self.root_cause,
                         fix_pattern=self.fix_pattern, ask=self.ask, matched=matched[:MAX_MATCHED_CHARS],
                         done=done, follow_up=follow_up,
                         playbook=self.is_playbook(matched, title),
                         localises=self.localises)

    def is_playbook(self, matched: str, title: str) -> bool:
        """Whether the match is the title's words alone: a `title_patterns` hit with no `requires` evidence. An
        answer to a question is never one: the title is the question, and the step is the documented answer."""
        return (not self.requires and not self.questions and matched == title
                and self._first(self._compiled["title_patterns"], [title]) is not None)


def _day(opened: datetime | date | None) -> date | None:
    return opened.date() if isinstance(opened, datetime) else opened


def _clauses_of(field: str, text: str, frameworks: Collection[str], general: bool = True) -> None:
    try:
        clauses.check(text, frameworks, general=general)
    except ValueError as error:
        raise ValueError(f"{field}: {error}") from None


def _in_axis(taxonomy: Taxonomy, axis: str, value: str) -> str:
    if value not in taxonomy.ids(axis):
        raise ValueError(f"{value!r} is not a {axis} of taxonomy {taxonomy.version}")
    return value
