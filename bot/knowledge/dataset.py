"""Reading the gold JSONL datasets and batch input files, reporting bad lines with file:line and field."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from bot.core.domain import Case, Issue
from bot.core.errors import DataError
from bot.core.settings import AXES
from bot.knowledge.taxonomy import Taxonomy
from bot.reading.opening import opened_no_later_than

GOLD_REQUIRED = ("id", "title", "body", "labels")
GOLD_FILES = ("ddl-dev.jsonl", "ddl-dev-r3.jsonl", "ddl-dev-r4.jsonl", "liu23.jsonl", "liu23-labels.jsonl")


@dataclass
class LoadReport:
    """What a load kept and what it skipped, with the reasons."""

    errors: list[DataError] = field(default_factory=list)
    skipped_no_text: int = 0

    def warn(self, error: DataError) -> None:
        self.errors.append(error)


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict[str, object] | DataError]]:
    """Yield (line number, object) per non-blank line, or a DataError for a line that is not a JSON object.

    Bytes that are not UTF-8 are replaced (U+FFFD) rather than dropping the line; that is reported too.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DataError(f"cannot open: {exc.strerror}", path=str(path)) from None
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace")
                yield lineno, DataError("bytes that are not UTF-8 were replaced by U+FFFD; line kept",
                                        path=str(path), line=lineno, kept=True)
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield lineno, DataError(f"not JSON ({exc.msg} at column {exc.colno}); line skipped",
                                        path=str(path), line=lineno)
                continue
            if not isinstance(obj, dict):
                yield lineno, DataError("not a JSON object; line skipped", path=str(path), line=lineno)
                continue
            yield lineno, obj


def read_issues(path: Path, on_error: Callable[[DataError], None]) -> Iterator[Issue]:
    """Issues of a batch input file (`id`, `title`, `body` at least); bad lines go to `on_error`."""
    for lineno, obj in iter_json_lines(path):
        if isinstance(obj, DataError):
            on_error(obj)
            continue
        missing = [k for k in ("id", "title", "body") if k not in obj]
        if missing:
            on_error(DataError("missing; line skipped", path=str(path), line=lineno, field=missing[0]))
            continue
        try:
            yield Issue(id=str(obj["id"]), title=str(obj["title"] or ""), body=str(obj["body"] or ""),
                        url=_opt_str(obj.get("url")), repo=_opt_str(obj.get("repo")),
                        created_at=obj.get("created_at") or None)
        except ValidationError as exc:
            err = exc.errors()[0]
            on_error(DataError(f"invalid ({err['msg']}); line skipped", path=str(path), line=lineno,
                               field=".".join(map(str, err["loc"])) or None))


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def parse_gold_record(obj: dict[str, object], taxonomy: Taxonomy, *, path: str, line: int) -> Case:
    """Validate one gold record against the format of the card and the taxonomy's ids."""
    for key in GOLD_REQUIRED:
        if key not in obj:
            raise DataError("missing", path=path, line=line, field=key)
    labels = obj["labels"]
    if not isinstance(labels, dict):
        raise DataError("must be an object of axis -> id", path=path, line=line, field="labels")
    clean: dict[str, dict[str, str | None]] = {"labels": {}, "silver": {}}
    for group in ("labels", "silver"):
        given = obj.get(group) or {}
        if not isinstance(given, dict):
            raise DataError("must be an object of axis -> id", path=path, line=line, field=group)
        for axis in AXES if group == "labels" else given:
            value = given.get(axis)
            if axis not in taxonomy.axes:
                raise DataError(f"unknown axis {axis!r}", path=path, line=line, field=f"{group}.{axis}")
            if value is not None and value not in taxonomy.ids(axis):
                raise DataError(f"{value!r} is not a {axis} of taxonomy {taxonomy.version}; use one of "
                                f"{list(taxonomy.ids(axis))}", path=path, line=line, field=f"{group}.{axis}")
            clean[group][axis] = value
    try:
        body = str(obj["body"] or "")
        return Case.model_validate({**obj, **clean, "id": str(obj["id"]), "title": obj["title"] or "",
                                    "body": body, "source_file": path,
                                    "created_at": obj.get("created_at") or opened_no_later_than(body)})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(err["msg"], path=path, line=line, field=".".join(map(str, err["loc"]))) from None


def load_gold(path: Path, taxonomy: Taxonomy, report: LoadReport | None = None) -> list[Case]:
    """All valid records of a gold file; invalid lines are added to `report` (or raised when none)."""
    cases: list[Case] = []
    for lineno, obj in iter_json_lines(path):
        if isinstance(obj, DataError) and obj.kept:  # a warning only: the line itself follows
            if report is not None:
                report.warn(obj)
            continue
        try:
            if isinstance(obj, DataError):
                raise obj
            cases.append(parse_gold_record(obj, taxonomy, path=str(path), line=lineno))
        except DataError as err:
            if report is None:
                raise
            report.warn(err)
    return cases


def load_case_base(paths: Iterable[Path], taxonomy: Taxonomy, report: LoadReport) -> list[Case]:
    """Cases with text from several gold files, first occurrence of an id wins (liu23-labels repeats liu23)."""
    seen: set[str] = set()
    cases: list[Case] = []
    for path in paths:
        for case in load_gold(path, taxonomy, report):
            if case.id in seen:
                continue
            if not (case.title.strip() or case.body.strip()):
                report.skipped_no_text += 1
                continue
            seen.add(case.id)
            cases.append(case)
    return cases


def default_case_files(data_dir: Path | None) -> list[Path]:
    """Every gold file present in the data directory."""
    if data_dir is None:
        raise DataError("no data directory: set DDL_TRIAGE_DATA_DIR or pass --data-dir "
                        "(the gold files of ../shared/data/gold)")
    files = [data_dir / name for name in GOLD_FILES if (data_dir / name).is_file()]
    if not files:
        raise DataError(f"no gold files ({', '.join(GOLD_FILES)}) in {data_dir}; set DDL_TRIAGE_DATA_DIR")
    return files
