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
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.core.domain import Diagnosis
from bot.core.errors import ConfigError
from bot.core.paths import shipped_dir
from bot.knowledge.datafile import describe_validation
from bot.knowledge.entry import Entry
from bot.knowledge.taxonomy import DIAGNOSTICS_FILE, load_taxonomy
from bot.reading.textmatch import LOG_PREFIX, MAX_LINE_CHARS, LineIndex, clean_lines

QUESTION_KINDS = frozenset({"usage_question", "documentation"})  # answered by the entries marked `questions: true`
REQUEST_KINDS = frozenset({"feature_request"})  # answered by the entries marked `requests: true`
MAX_DIAGNOSES = 3  # a comment shows one next step; two more at most are context, never a checklist


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
    return [entry.diagnosis(line, done, title_line, framework, opened) for entry, line, done in hits
            if entry.id not in superseded][:MAX_DIAGNOSES]
