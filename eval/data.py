"""Loading gold files for a benchmark: every record kept or skipped is accounted for, with file:line."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.domain import Case
from bot.core.errors import DataError
from bot.knowledge.dataset import iter_json_lines, parse_gold_record
from bot.knowledge.taxonomy import Taxonomy


@dataclass
class LoadedSet:
    """The usable records of one file, and what was set aside and why."""

    path: Path
    cases: list[Case] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # file:line messages, skipped or repaired lines
    skipped_lines: int = 0
    no_text: int = 0
    duplicate_ids: int = 0

    def summary(self) -> dict[str, object]:
        return {"file": str(self.path), "records": len(self.cases), "skipped_lines": self.skipped_lines,
                "skipped_no_text": self.no_text, "skipped_duplicate_ids": self.duplicate_ids,
                "problems": self.problems}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_set(path: Path, taxonomy: Taxonomy) -> LoadedSet:
    """Records with text, first occurrence of an id kept; bad lines are skipped and reported."""
    if not path.is_file():
        raise DataError("no such dataset file; give the path of a gold JSONL file "
                        "(e.g. ../shared/data/gold/ddl-dev.jsonl)", path=str(path))
    loaded = LoadedSet(path=path)
    failed: set[int] = set()
    parsed: set[int] = set()
    seen: set[str] = set()
    for lineno, obj in iter_json_lines(path):
        if isinstance(obj, DataError):
            loaded.problems.append(str(obj))
            failed.add(lineno)
            continue
        parsed.add(lineno)
        try:
            case = parse_gold_record(obj, taxonomy, path=str(path), line=lineno)
        except DataError as err:
            loaded.problems.append(f"{err}; line skipped")
            loaded.skipped_lines += 1
            continue
        if case.id in seen:
            loaded.duplicate_ids += 1
            loaded.problems.append(f"{path}:{lineno}: duplicate id {case.id!r}; line skipped (field 'id')")
        elif not (case.title.strip() or case.body.strip()):
            loaded.no_text += 1
        else:
            seen.add(case.id)
            loaded.cases.append(case)
    loaded.skipped_lines += len(failed - parsed)
    return loaded
