"""The measures behind the README's tables, as `python -m eval` commands: the similarity floor, the diagnostic
knowledge base and the error signatures on the gold data."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.core.settings import Settings

if TYPE_CHECKING:
    from eval.neighbour_floor import Pairs

SIGNATURE_FILES = ("ddl-dev.jsonl", "ddl-dev-r3.jsonl", "liu23.jsonl")


def floor(
    dataset: Annotated[list[Path] | None, typer.Option(help="Records whose neighbours are scored (default: the "
                                                       "ddl-dev files).")] = None,
    nested: Annotated[bool, typer.Option("--nested", help="Also choose the floor inside parts of the records and "
                                         "score each part at its own floor and at the shipped one.")] = False,
    memory: Annotated[bool, typer.Option("--memory", help="The repository memory's floors instead: each record's "
                                         "3 nearest earlier records of its own repository, for failures (gold "
                                         "symptom) and for questions (gold stage; any record as a neighbour).")
                      ] = False,
) -> None:
    """Precision of "the neighbour shares the gold label" per similarity bin (the comment's floors)."""
    from bot.knowledge.dataset import default_case_files
    from eval.cli import load_settings
    from eval.neighbour_floor import PRECEDENT_TARGET, bin_pairs, format_table, memory_pairs, neighbour_pairs

    settings = load_settings()
    files = default_case_files(settings.data_dir)
    queries = dataset or [f for f in files if f.name.startswith("ddl-dev")]
    names = ", ".join(q.name for q in queries)
    if memory:
        measured = [("failures", "symptom", None, settings.memory_related_floor),
                    ("questions", "stage", "usage_question", settings.memory_question_floor)]
        for what, axis, kind, fixed in measured:
            pairs = memory_pairs(settings, queries, axis=axis, kind=kind)
            print(f"\n{what}: the 3 nearest earlier records of the same repository, as opened ({names}; "
                  f"{len(set(pairs.query))} records, {len(pairs.sims)} pairs; the same established gold {axis})")
            print(format_table(bin_pairs(pairs.sims, pairs.same), axis))
            if nested:
                rule = f"the lowest bin from which on the share at or above reaches {PRECEDENT_TARGET:.2f}"
                print_nested(pairs, fixed, rule, PRECEDENT_TARGET, axis)
        return
    pairs = neighbour_pairs(settings, queries, files)
    print(f"neighbours of {names} among {', '.join(f.name for f in files)} (k=10; {len(pairs.sims)} pairs with an "
          "established gold symptom on both sides)")
    print(format_table(bin_pairs(pairs.sims, pairs.same)))
    if nested:
        rule = (f"by a hash of the id; the lowest bin from which on the share at or above reaches "
                f"{PRECEDENT_TARGET:.2f}, the comment's precision target for what it cites")
        print_nested(pairs, settings.similarity_floor, rule, PRECEDENT_TARGET)


def print_nested(pairs: Pairs, fixed: float, rule: str, target: float | None = None, label: str = "symptom") -> None:
    """The floor chosen inside the parts of the records (`eval.neighbour_floor.nested_floor`) against `fixed`."""
    from eval.neighbour_floor import PARTS, format_nested, nested_floor

    print(f"\nthe floor chosen inside {PARTS} parts of the records ({rule}), against the shipped {fixed:.2f}:")
    print(format_nested(nested_floor(pairs, fixed, target), fixed, label))


def diagnostics(
    dataset: Annotated[list[str] | None, typer.Option(help="Gold files of the data directory to read (default: "
                                                      "ddl-dev.jsonl, ddl-dev-r3.jsonl, ddl-dev-r4.jsonl, "
                                                      "liu23.jsonl).")] = None,
    opened: Annotated[bool, typer.Option("--opened", help="Read each gold thread as opened: its opening post only "
                                         "(windows that start mid-thread are left out).")] = False,
    wrong: Annotated[bool, typer.Option("--wrong", help="List, per entry, the records where its symptoms miss the "
                                        "gold symptom.")] = False,
    knowledge_base: Annotated[Path | None, typer.Option(
        "--knowledge-base", help="Measure this diagnostics file instead of the shipped one: an earlier version on data "
        "it was not written from, e.g. `--knowledge-base <(git show e2a1e87:taxonomy/diagnostics.yaml) --dataset "
        "ddl-dev-r4.jsonl --opened`.")] = None,
) -> None:
    """Per entry of taxonomy/diagnostics.yaml: how often it fires on the gold texts, and how often rightly."""
    from bot.knowledge.diagnostics import load_diagnostics_file
    from eval.diagnostics import GOLD_TEXT_FILES, format_summary, format_table, gold_cases, measure_diagnostics

    _, data_dir = gold_settings()
    base = load_diagnostics_file(knowledge_base) if knowledge_base else None
    files, cases = gold_cases(data_dir, tuple(dataset or GOLD_TEXT_FILES))
    report = measure_diagnostics(files, cases, base, opened=opened)
    print(format_table(report) + "\n")
    print(format_summary(report))
    if wrong:
        print("\n".join(f"{r.id}: {', '.join(r.wrong)}" for r in report.rows if r.wrong))


def signatures(
    dataset: Annotated[list[Path] | None, typer.Option(help="Gold files whose records are compared (default: both "
                                                       "ddl-dev files and liu23.jsonl).")] = None,
) -> None:
    """Error signatures on the gold data: coverage, recurrence, and gold-symptom precision beside the cosine floor."""
    from eval.signature_report import format_report, measure_signatures

    settings, data_dir = gold_settings()
    files = dataset or [data_dir / n for n in SIGNATURE_FILES if (data_dir / n).is_file()]
    report = measure_signatures(settings, files)
    print(f"error signatures of {report.records} records of {', '.join(f.name for f in files)}; pairs of records "
          "sharing a signature (or above a cosine floor) with the same established gold symptom")
    print(format_report(report))


def gold_settings() -> tuple[Settings, Path]:
    """The settings and their gold data directory, or a one-line error saying how to set it."""
    from eval.cli import fail, load_settings

    settings = load_settings()
    if settings.data_dir is None:
        fail("no gold data directory: set DDL_TRIAGE_DATA_DIR (the folder of ddl-dev.jsonl)")
    return settings, settings.data_dir
