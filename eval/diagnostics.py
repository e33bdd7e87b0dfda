"""Does a diagnostic entry agree with the gold labels? Per entry: how often it fires and how often rightly.

Every gold record is diagnosed from its title and body alone (the patterns, with the framework its repository or
text names, and no kind: the bot would also pass its predicted kind, which only silences more); with `opened`, from
its opening post only, as the App sees a new issue (a window that starts mid-thread has no opening post and is left
out). A diagnosis is right when the record's gold symptom is one of the entry's symptoms; "shown" scores the one
diagnosis a comment would show (bot/comment/compose.py `shown_diagnosis`: the follow-up when the post did the step,
a later diagnosis of the same failure when the first only localises). Records whose gold kind is not a bug report
must get none; coverage is the share of bug reports that get at least one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.comment.compose import shown_diagnosis
from bot.core.domain import Case
from bot.knowledge.dataset import LoadReport, load_case_base
from bot.knowledge.diagnostics import KnowledgeBase, diagnose, load_diagnostics
from bot.knowledge.taxonomy import load_taxonomy
from bot.reading.normalise import extract_environment
from bot.reading.opening import as_opened

# Every gold file with texts (liu23-labels.jsonl only relabels liu23's texts).
GOLD_TEXT_FILES = ("ddl-dev.jsonl", "ddl-dev-r3.jsonl", "ddl-dev-r4.jsonl", "liu23.jsonl")
MIN_PRECISION = 0.8  # an entry that fires on 3 or more gold records must be right this often
MIN_N = 3


@dataclass
class EntryRow:
    id: str
    frameworks: tuple[str, ...]
    n: int = 0  # bug reports with a gold symptom on which it was shown
    hits: int = 0  # ... whose gold symptom is one of its symptoms
    wrong: list[str] = field(default_factory=list)  # record ids where it was not

    @property
    def precision(self) -> float | None:
        return self.hits / self.n if self.n else None


@dataclass
class DiagnosticsReport:
    version: str
    files: list[str]
    rows: list[EntryRow]
    opened: bool = False  # measured on the opening posts only
    bug_reports: int = 0
    covered: int = 0  # bug reports with at least one diagnosis
    top_n: int = 0  # bug reports with a gold symptom and a diagnosis a comment would show: is it right?
    top_hits: int = 0
    not_bugs: int = 0
    not_bug_fires: list[tuple[str, str]] = field(default_factory=list)  # (record id, entry id)

    @property
    def n(self) -> int:
        return sum(r.n for r in self.rows)

    @property
    def hits(self) -> int:
        return sum(r.hits for r in self.rows)

    def below_floor(self) -> list[EntryRow]:
        return [r for r in self.rows if r.n >= MIN_N and (r.precision or 0.0) < MIN_PRECISION]


def gold_cases(data_dir: Path, names: tuple[str, ...] = GOLD_TEXT_FILES) -> tuple[list[str], list[Case]]:
    taxonomy = load_taxonomy("ddl-v1")
    paths = [data_dir / name for name in names if (data_dir / name).is_file()]
    return [p.name for p in paths], load_case_base(paths, taxonomy, LoadReport())


def measure_diagnostics(files: list[str], cases: list[Case], base: KnowledgeBase | None = None, *,
                        opened: bool = False) -> DiagnosticsReport:
    base = base or load_diagnostics()
    report = DiagnosticsReport(base.version, files, [EntryRow(e.id, e.frameworks) for e in base.entries], opened)
    rows = {r.id: r for r in report.rows}
    for record in cases:
        case = as_opened(record) if opened else record  # the opening post alone, dated by its header
        if case is None:
            continue
        framework = extract_environment(f"{case.title}\n{case.body}", case.repo).framework
        found = diagnose(case.title, case.body, framework=framework, kind=None, base=base,
                         opened=case.created_at if opened else None)
        kind, symptom = case.labels.get("kind"), case.labels.get("symptom")
        if kind != "bug_report":
            report.not_bugs += 1
            report.not_bug_fires += [(case.id, d.id) for d in found]
            continue
        report.bug_reports += 1
        report.covered += bool(found)
        if symptom is None or not found:
            continue
        shown = shown_diagnosis(found)
        if shown is not None:
            report.top_n += 1
            report.top_hits += symptom in shown.symptoms
        for diagnosis in found:
            row = rows[diagnosis.id]
            row.n += 1
            if symptom in diagnosis.symptoms:
                row.hits += 1
            else:
                row.wrong.append(case.id)
    return report


def format_table(report: DiagnosticsReport) -> str:
    lines = ["| entry | frameworks | n | precision |", "|---|---|---|---|"]
    for row in report.rows:
        shown = "-" if row.precision is None else f"{row.precision:.2f}"
        lines.append(f"| `{row.id}` | {', '.join(row.frameworks) or 'any'} | {row.n} | {shown} |")
    return "\n".join(lines)


def format_summary(report: DiagnosticsReport) -> str:
    fired = sum(1 for r in report.rows if r.n)
    share = report.covered / report.bug_reports if report.bug_reports else 0.0
    precision = report.hits / report.n if report.n else 0.0
    top = report.top_hits / report.top_n if report.top_n else 0.0
    low = [f"{r.id} ({r.hits}/{r.n})" for r in report.rows if r.n and (r.precision or 0.0) < MIN_PRECISION]
    return "\n".join([
        f"{report.version}: {len(report.rows)} entries, {fired} fired on the "
        f"{'opening posts' if report.opened else 'gold texts'} of {', '.join(report.files)}",
        f"coverage: {report.covered}/{report.bug_reports} bug reports ({share:.0%}) get at least one diagnosis",
        f"precision: {report.hits}/{report.n} diagnoses shown ({precision:.2f}); the diagnosis a comment shows "
        f"{report.top_hits}/{report.top_n} ({top:.2f})",
        f"not bug reports: {len(report.not_bug_fires)} diagnoses on {report.not_bugs} records"
        + "".join(f"; {rid}: {eid}" for rid, eid in report.not_bug_fires),
        f"entries under {MIN_PRECISION}: " + (", ".join(low) or "none")
        + f" (the floor applies from n >= {MIN_N})",
    ])
