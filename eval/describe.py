"""The studies' descriptive tables from any labelled file: stages, symptoms within stage, fix patterns.

With the native taxonomy of the TOSEM'23 study (`liu23`) the labels are the study's own (`native` in the
records); with `ddl-v1` they are the records' `labels`. Every label is checked against the taxonomy.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import ConfigError, DataError
from bot.knowledge.dataset import iter_json_lines, parse_gold_record
from bot.knowledge.taxonomy import Taxonomy, load_taxonomy

NATIVE = "liu23"
COMPOUND = re.compile(r"\s[&/]\s")  # compound native fix patterns: the first part decides
NOT_APPLICABLE = {"nan", ""}  # the study's inner category of stages that have none
NONE_SHOWN = "(none)"
WIDE_MATRIX = 12  # more fix-pattern columns than this: the matrix is listed row by row instead


@dataclass(frozen=True)
class Labelled:
    """The labels of one record that the descriptive tables use."""

    stage: str | None
    inner: str | None
    symptom: str | None
    fix: str | None
    distributed: bool | None


def read_labelled(path: Path, taxonomy: str) -> tuple[str, list[Labelled], list[DataError]]:
    """(taxonomy used, labelled rows, problems): `auto` picks liu23 when every record has native labels."""
    objects = list(iter_json_lines(path))
    problems = [obj for _, obj in objects if isinstance(obj, DataError)]
    records = [(line, obj) for line, obj in objects if not isinstance(obj, DataError)]
    if taxonomy == "auto":
        native = bool(records) and all(isinstance(obj.get("native"), dict) for _, obj in records)
        taxonomy = NATIVE if native else "ddl-v1"
    if taxonomy not in (NATIVE, "ddl-v1"):
        raise ConfigError(f"--taxonomy {taxonomy!r}: use ddl-v1, liu23 or auto")
    reader = native_labels if taxonomy == NATIVE else ddl_labels
    spec = load_taxonomy(taxonomy)
    rows: list[Labelled] = []
    for line, obj in records:
        try:
            rows.append(reader(obj, spec, str(path), line))
        except DataError as err:
            problems.append(err)
    return taxonomy, rows, problems


def ddl_labels(obj: dict[str, object], taxonomy: Taxonomy, path: str, line: int) -> Labelled:
    case = parse_gold_record(obj, taxonomy, path=path, line=line)
    return Labelled(case.labels.get("stage"), None, case.labels.get("symptom"), case.labels.get("fix_pattern"),
                    _distributed(obj))


def native_labels(obj: dict[str, object], taxonomy: Taxonomy, path: str, line: int) -> Labelled:
    native = obj.get("native")
    if not isinstance(native, dict):
        raise DataError("missing: the native taxonomy needs the study's labels", path=path, line=line, field="native")

    def label(axis: str, raw: object) -> str | None:
        if raw is None or (axis == "inner_category" and str(raw).strip().lower() in NOT_APPLICABLE):
            return None
        found = taxonomy.canonical(axis, str(raw).strip())
        if found is None:
            raise DataError(f"{raw!r} is not a {axis} of taxonomy {taxonomy.version}", path=path, line=line,
                            field=f"native.{axis}")
        return found

    fix = native.get("fix_pattern")
    parts = [label("fix_pattern", part) for part in COMPOUND.split(str(fix))] if fix is not None else [None]
    return Labelled(label("stage", native.get("stage")), label("inner_category", native.get("inner_category")),
                    label("symptom", native.get("symptom")), parts[0], _distributed(obj))


def _distributed(obj: dict[str, object]) -> bool | None:
    native = obj.get("native")
    value = native.get("distributed_specific") if isinstance(native, dict) else None
    return value if isinstance(value, bool) else None


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _shown(value: str | None) -> str:
    return NONE_SHOWN if value is None else value


def _ordered(values: Iterable[str | None], order: Sequence[str]) -> list[str | None]:
    """Distinct values in taxonomy order, unknown ones after, None last."""
    distinct = set(values)
    known = [v for v in order if v in distinct]
    return known + sorted(v for v in distinct if v is not None and v not in order) + \
        ([None] if None in distinct else [])


def stage_table(rows: Sequence[Labelled], taxonomy: Taxonomy) -> list[str]:
    counts = Counter(r.stage for r in rows)
    lines = ["| stage | n | share |", "|---|---|---|"]
    lines += [f"| {_shown(s)} | {counts[s]} | {_share(counts[s], len(rows))} |"
              for s in _ordered(counts, taxonomy.ids("stage"))]
    return [*lines, f"| **total** | **{len(rows)}** | 100% |"]


def symptom_table(rows: Sequence[Labelled], taxonomy: Taxonomy) -> list[str]:
    """Leaf counts: symptoms within stage (and inner category, where the taxonomy has one)."""
    inner = any(r.inner for r in rows)
    stages = Counter(r.stage for r in rows)
    groups = Counter((r.stage, r.inner, r.symptom) for r in rows)
    head = "| stage | inner category | symptom | n | share of stage | share of all |" if inner else \
        "| stage | symptom | n | share of stage | share of all |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for stage in _ordered(stages, taxonomy.ids("stage")):
        members = sorted(((k, n) for k, n in groups.items() if k[0] == stage),
                         key=lambda item: (_shown(item[0][1]), -item[1], _shown(item[0][2])))
        for (_, inner_value, symptom), n in members:
            middle = f" {_shown(inner_value)} |" if inner else ""
            lines.append(f"| {_shown(stage)} |{middle} {_shown(symptom)} | {n} | {_share(n, stages[stage])} | "
                         f"{_share(n, len(rows))} |")
    return lines


def inner_table(rows: Sequence[Labelled], taxonomy: Taxonomy) -> list[str]:
    counts = Counter((r.stage, r.inner) for r in rows if r.inner)
    stages = Counter(r.stage for r in rows)
    lines = ["| stage | inner category | n | share of stage |", "|---|---|---|---|"]
    return lines + [f"| {_shown(s)} | {i} | {n} | {_share(n, stages[s])} |"
                    for (s, i), n in sorted(counts.items(), key=lambda item: (_shown(item[0][0]), -item[1]))]


def fix_matrix(rows: Sequence[Labelled]) -> tuple[list[str | None], list[str | None], list[list[int]]]:
    """(symptoms, fix patterns, counts): symptom rows by frequency, fix columns by frequency."""
    symptoms = [s for s, _ in Counter(r.symptom for r in rows).most_common()]
    fixes = [f for f, _ in Counter(r.fix for r in rows).most_common()]
    pairs = Counter((r.symptom, r.fix) for r in rows)
    return symptoms, fixes, [[pairs[(s, f)] for f in fixes] for s in symptoms]


def fix_table(rows: Sequence[Labelled], taxonomy: Taxonomy) -> list[str]:
    symptoms, fixes, matrix = fix_matrix(rows)
    if len(fixes) <= WIDE_MATRIX:
        lines = [f"| symptom \\ fix pattern | {' | '.join(_shown(f) for f in fixes)} | n |",
                 "|---|" + "---|" * (len(fixes) + 1)]
        return lines + [f"| {_shown(s)} | {' | '.join(str(c) for c in counts)} | {sum(counts)} |"
                        for s, counts in zip(symptoms, matrix, strict=True)]
    lines = ["| symptom | n | fix patterns (n), most frequent first |", "|---|---|---|"]
    for symptom, counts in zip(symptoms, matrix, strict=True):
        listed = "; ".join(f"{_shown(f)} ({c})" for f, c in sorted(zip(fixes, counts, strict=True),
                                                                   key=lambda item: -item[1]) if c)
        lines.append(f"| {_shown(symptom)} | {sum(counts)} | {listed} |")
    return lines


def distributed_table(rows: Sequence[Labelled], taxonomy: Taxonomy) -> list[str]:
    known = [r for r in rows if r.distributed is not None]
    if not known:
        return []
    stages = Counter(r.stage for r in known)
    specific = Counter(r.stage for r in known if r.distributed)
    lines = ["| stage | n | distributed-specific | share |", "|---|---|---|---|"]
    lines += [f"| {_shown(s)} | {stages[s]} | {specific[s]} | {_share(specific[s], stages[s])} |"
              for s in _ordered(stages, taxonomy.ids("stage"))]
    total = sum(specific.values())
    return [*lines, f"| **total** | **{len(known)}** | **{total}** | {_share(total, len(known))} |"]


def render_description(path: Path, taxonomy_name: str, rows: Sequence[Labelled], problems: Sequence[DataError]
                       ) -> str:
    taxonomy = load_taxonomy(taxonomy_name)
    fix_note = " (compound native fix patterns: the first part)" if taxonomy_name == NATIVE else ""
    sections = [
        (f"# {path.name}: descriptive tables (taxonomy {taxonomy.version})", [
            f"{len(rows)} labelled records; {len(problems)} lines skipped" + (" (listed on stderr)" if problems else "")
            + f". `{NONE_SHOWN}` = no value on that axis."]),
        ("## Stages", stage_table(rows, taxonomy)),
        ("## Inner categories", inner_table(rows, taxonomy) if any(r.inner for r in rows) else []),
        ("## Symptoms within stage (leaf counts)", symptom_table(rows, taxonomy)),
        (f"## Symptom -> fix pattern{fix_note}", fix_table(rows, taxonomy)),
        ("## Distributed-specific faults", distributed_table(rows, taxonomy)),
    ]
    return "\n\n".join(f"{title}\n\n" + "\n".join(body) for title, body in sections if body) + "\n"


def describe_file(path: Path, taxonomy: str, out: Path | None) -> str:
    """The markdown tables of a labelled file; with `out`, also describe-*.md and a heatmap PNG there."""
    if not path.is_file():
        raise DataError("no such file; give a labelled JSONL file (e.g. ../shared/data/gold/liu23-labels.jsonl)",
                        path=str(path))
    used, rows, problems = read_labelled(path, taxonomy)
    for problem in problems:
        print(f"eval: warning: {str(problem).replace('; line skipped', '')}; line skipped", file=sys.stderr)
    if not rows:
        raise DataError(f"no usable labelled records ({len(problems)} lines skipped, listed above)", path=str(path))
    text = render_description(path, used, rows, problems)
    if out is not None:
        from eval.plots import heatmap_figure, save

        out.mkdir(parents=True, exist_ok=True)
        stem = f"describe-{path.stem}-{used}"
        (out / f"{stem}.md").write_text(text, encoding="utf-8")
        symptoms, fixes, matrix = fix_matrix(rows)
        figure = heatmap_figure(matrix, [_shown(s) for s in symptoms], [_shown(f) for f in fixes],
                                f"{path.name}: symptom -> fix pattern ({used})")
        save(figure, out / f"{stem}-symptom-fix.png")
        print(f"eval: wrote {stem}.md and {stem}-symptom-fix.png to {out}", file=sys.stderr)
    return text
