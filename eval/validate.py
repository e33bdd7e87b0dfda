"""`validate`: every dataset, taxonomy, diagnostics file, prompt and benchmark definition checked, no model run.

Each problem is one line naming the file, the line (for JSONL) and the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from bot.core.errors import ConfigError, DataError
from bot.core.paths import shipped_dir
from bot.knowledge.dataset import iter_json_lines, parse_gold_record
from bot.knowledge.diagnostics import diagnostics_path, load_diagnostics_file
from bot.knowledge.prompts import load_prompt
from bot.knowledge.taxonomy import load_taxonomy, load_taxonomy_file, taxonomy_files
from eval.describe import NATIVE, native_labels
from eval.task import load_task_file, task_files

GOLD_TAXONOMY_CARD = "taxonomy-ddl-v1.yaml"

Report = tuple[list[str], list[str]]  # (problems, lines saying what was checked)


def validate_all(data_dir: Path | None, datasets: Sequence[Path] | None = None) -> Report:
    """Problems and a summary line per checked file; datasets default to every *.jsonl of `data_dir`."""
    problems: list[str] = []
    checked: list[str] = []
    for check in (_taxonomies(data_dir), _diagnostics(), _prompts(), _tasks(data_dir)):
        problems += check[0]
        checked += check[1]
    if datasets is None:
        if data_dir is None or not data_dir.is_dir():
            problems.append("no data directory: set DDL_TRIAGE_DATA_DIR or pass --data-dir (the folder of "
                            "ddl-dev.jsonl)")
            return problems, checked
        datasets = sorted(data_dir.glob("*.jsonl"))
    for path in datasets:
        found, line = validate_dataset(path)
        problems += found
        checked.append(line)
    return problems, checked


def validate_dataset(path: Path) -> tuple[list[str], str]:
    """Every line: JSON, the record format, ddl-v1 ids, unique ids, and native labels where present."""
    if not path.is_file():
        return [f"{path}: no such dataset file"], f"FAIL {path}"
    taxonomy, native = load_taxonomy("ddl-v1"), load_taxonomy(NATIVE)
    problems: list[str] = []
    seen: dict[str, int] = {}
    records = with_native = 0
    for lineno, obj in iter_json_lines(path):
        if isinstance(obj, DataError):
            problems.append(str(obj))
            continue
        try:
            case = parse_gold_record(obj, taxonomy, path=str(path), line=lineno)
            if isinstance(obj.get("native"), dict):
                native_labels(obj, native, str(path), lineno)
                with_native += 1
        except DataError as err:
            problems.append(str(err))
            continue
        if case.id in seen:
            problems.append(str(DataError(f"duplicate id {case.id!r} (first on line {seen[case.id]})",
                                          path=str(path), line=lineno, field="id")))
        seen.setdefault(case.id, lineno)
        records += 1
    status = "FAIL" if problems else "ok  "
    note = f", {with_native} with native liu23 labels" if with_native else ""
    return problems, f"{status} {path}: {records} valid records{note}, {len(problems)} problems"


def _taxonomies(data_dir: Path | None) -> Report:
    problems: list[str] = []
    checked: list[str] = []
    for path in taxonomy_files():
        try:
            taxonomy = load_taxonomy_file(path)
            checked.append(f"ok   {path}: taxonomy {taxonomy.version}")
        except ConfigError as err:
            problems.append(str(err))
            checked.append(f"FAIL {path}")
    card = data_dir / GOLD_TAXONOMY_CARD if data_dir else None
    if card is not None and card.is_file():
        found = _compare_card(card)
        problems += found
        checked.append(f"{'FAIL' if found else 'ok  '} {card}: same ids as the shipped ddl-v1")
    return problems, checked


def _compare_card(card: Path) -> list[str]:
    """The data's own taxonomy file must list exactly the ids of the shipped ddl-v1, axis by axis."""
    try:
        raw = yaml.safe_load(card.read_text(encoding="utf-8"))
        axes = {name: [v["id"] for v in axis["values"]] for name, axis in raw["axes"].items()}
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        return [f"{card}: not a taxonomy with axes.<axis>.values[].id ({type(exc).__name__}: {exc})"]
    shipped = load_taxonomy("ddl-v1")
    problems = []
    for name in sorted(set(axes) | set(shipped.axes)):
        ours = list(shipped.ids(name)) if name in shipped.axes else []
        if axes.get(name, []) != ours:
            differing = sorted(set(axes.get(name, [])) ^ set(ours)) or "the same ids in another order"
            problems.append(f"{card}: axis {name!r} differs from taxonomy/ddl-v1.yaml: {differing} "
                            f"(field 'axes.{name}')")
    return problems


def _diagnostics() -> Report:
    path = diagnostics_path()
    try:
        base = load_diagnostics_file(path)
    except ConfigError as err:
        return [str(err)], [f"FAIL {path}"]
    return [], [f"ok   {path}: diagnostics {base.version}, {len(base.entries)} entries on taxonomy {base.taxonomy}"]


def _prompts() -> Report:
    problems: list[str] = []
    checked: list[str] = []
    for path in sorted(shipped_dir("prompts").glob("*.yaml")):
        try:
            checked.append(f"ok   {path}: prompt {load_prompt(str(path)).version}")
        except ConfigError as err:
            problems.append(str(err))
            checked.append(f"FAIL {path}")
    return problems, checked


def _tasks(data_dir: Path | None) -> Report:
    problems: list[str] = []
    checked: list[str] = []
    for path in task_files():
        try:
            task = load_task_file(path)
        except ConfigError as err:
            problems.append(str(err))
            checked.append(f"FAIL {path}")
            continue
        names = (*task.datasets, *(task.extra_cases or ()), *task.train_on)
        missing = [n for n in names if data_dir is not None and not (data_dir / n).is_file()]
        problems += [f"{path}: {n!r} is not a file of the data directory {data_dir}" for n in missing]
        checked.append(f"{'FAIL' if missing else 'ok  '} {path}: benchmark {task.name} v{task.version}")
    return problems, checked
