"""report.md from a results object: the tables a person reads, with the figures beside them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.core.settings import AXES
from eval.metrics import BOOTSTRAP_RESAMPLES, TOP_K
from eval.plots import reference_predictor, write_run_plots
from eval.tables import all_tables, export_tables

Results = Mapping[str, Any]
CONVENTIONS = f"""\
## How to read these numbers
- **Scored records**: on each axis, records whose gold value is missing, `unknown` or `unresolved` are
  skipped and counted (see *skipped*); every other metric is over the scored records only.
- **accuracy, macro-F1, top-{TOP_K}** use the predictor's top-ranked label for every scored record, whether or
  not the bot would show it. **Macro-F1** averages F1 over the classes present in the gold labels *or* the
  predictions of that axis (a predicted class that never occurs in gold counts with F1 = 0).
- **[low, high]** is the 95% percentile interval of {BOOTSTRAP_RESAMPLES} seeded bootstrap resamples of the
  scored records.
- **coverage @ t / precision @ t**: with the configured abstention threshold t on the calibrated confidence,
  the share of scored records that get a label, and the accuracy of those labels (the bot's operating point).
- **accuracy-coverage curve**: records sorted by calibrated confidence, descending; at each distinct
  confidence, the share answered and their accuracy. *area* is the accuracy integrated over coverage.
- In cross-validation, linked records (a pull request and the issue it fixes, `#N` or URL references,
  identical titles) and near-duplicate texts (cosine >= the configured value) always share a fold, and extra
  case-base records that copy a test record (same id or near-duplicate) are left out of that fold's case base.
  Repeated cross-validation draws repetition r's folds with seed + r; *mean ± sd* is over repetitions, while
  intervals, curves, per-class tables and figures are of the first repetition.
- **root_cause** is scored on bug reports only; records whose gold cause is `none` are counted apart (how
  often the predictor said `none`). In transfer, an axis whose scored records hold fewer than 2 gold classes
  is not scored, and only labels both the case base and the test set hold are scored (rankings keep those).

## Data card
- Labels of `ddl-dev*.jsonl` were assigned with an **LLM-assisted** expert annotation procedure
  (`LABELING.md` of the gold data); its double-labelling agreement measures the procedure's consistency, not
  the agreement of independent human experts. Round 3 (`ddl-dev-r3.jsonl`) was labelled once, with lower
  agreement on a blind sample (symptom kappa 0.86 against 0.96): treat its labels as a little noisier.
- Licence: the issue text belongs to its authors on GitHub and is not redistributed by this project (the
  gold files are read in place); the gold data card states no licence of its own for `ddl-dev*.jsonl`.
  `liu23*.jsonl` labels come from the TOSEM 2023 replication package (gudiandian/TOSEM23-DistributedTraining),
  Apache-2.0.
"""


def write_outputs(results: Results, out: Path) -> list[Path]:
    """results.json, every figure, and report.md (which links the figures) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    figures = [write_run_plots(e, out, stem) for e, stem in zip(results["evaluations"], _stems(results),
                                                                strict=True)]
    for evaluation, stem, found in zip(results["evaluations"], _stems(results), figures, strict=True):
        found["tables"] = export_tables(evaluation, out, stem)
    (out / "report.md").write_text(render_report(results, figures), encoding="utf-8")
    return sorted(p for p in out.rglob("*") if p.is_file())


def render_report(results: Results, figures: Sequence[Mapping[str, list[str]]] | None = None) -> str:
    config = results["config"]
    parts = [f"# ddl-triage benchmark: {config.get('task') or ', '.join(e['name'] for e in results['evaluations'])}",
             "", *_header(results), ""]
    for i, evaluation in enumerate(results["evaluations"]):
        parts += _evaluation(evaluation, figures[i] if figures else {})
    parts.append(CONVENTIONS)
    return "\n".join(parts)


def headline_table(evaluation: Mapping[str, Any]) -> list[str]:
    """Macro-F1 with its interval, per predictor and axis (the table of the README)."""
    axes = [a for a in AXES if any(p["axes"][a].get("n") for p in evaluation["predictors"].values())]
    rows = [f"| predictor | {' | '.join(axes)} |", "|---|" + "---|" * len(axes)]
    for name, predictor in evaluation["predictors"].items():
        rows.append(f"| {name} | " + " | ".join(_f1_cell(predictor["axes"][a]) for a in axes) + " |")
    scored = " | ".join(f"{_n(evaluation, a)}" for a in axes)
    rows.append(f"| *scored records* | {scored} |")
    return rows


def _header(results: Results) -> list[str]:
    config, prov = results["config"], results["provenance"]
    git = prov["git"]
    sha = (git.get("sha") or "unknown")[:12] + (" (uncommitted changes)" if git.get("dirty") else "")
    settings = config["settings"]
    task = f"task `{config['task']}` v{config['task_version']}; " if config.get("task") else ""
    return [
        f"Command: `{results.get('command') or 'python -m eval run'}`  ",
        f"Run {results['created_utc']} in {results['duration_s']} s ({results.get('workers', 1)} workers); "
        f"git {sha}; {task}seed {config['seed']}.  ",
        f"Taxonomy {prov['taxonomy']['version']}; embedding model `{prov['embedding_model']}`; "
        f"neighbours {settings['neighbours']}; silver labels for training: {settings['use_silver']}; "
        f"LLM: {settings.get('llm') or 'not configured'}.  ",
        "Abstention thresholds: " + ", ".join(f"{a} {t}" for a, t in settings["thresholds"].items()) + ".  ",
        "Data: " + "; ".join(f"`{Path(p).name}` sha256 {d['sha256'][:12]}" for p, d in prov["data_files"].items())
        + ". Everything else (package versions, per-sample predictions with input hashes) is in `results.json`.",
    ]


def _evaluation(evaluation: Mapping[str, Any], figures: Mapping[str, list[str]]) -> list[str]:
    lines = [f"## {evaluation['name']}: {_mode(evaluation)}", "", *_data_lines(evaluation), "",
             "### Macro-F1 per axis [95% bootstrap interval]", "", *headline_table(evaluation), ""]
    lines += [f"![accuracy-coverage curves]({f})" for f in figures.get("coverage", [])] + [""]
    for table in all_tables(evaluation):
        lines += table.markdown()
    lines += _none_apart(evaluation)
    lines += [f"![reliability diagram]({f})" for f in figures.get("reliability", [])] + [""]
    if figures.get("tables"):
        lines += ["Every table above as CSV and LaTeX: " + ", ".join(f"`{t}`" for t in figures["tables"]), ""]
    lines += _llm_usage(evaluation)
    for axis in AXES:
        if _n(evaluation, axis):
            lines += _axis_section(evaluation, axis, figures)
    return lines


def _mode(evaluation: Mapping[str, Any]) -> str:
    text = ("predicted from the whole thread window: an upper bound, not what the App sees"
            if evaluation.get("text") == "thread" else "as opened (the opening post, dated)")
    return f"{_folds(evaluation)}; {text}"


def _folds(evaluation: Mapping[str, Any]) -> str:
    if evaluation["mode"] == "transfer":
        return "cross-dataset transfer"
    if evaluation.get("fold_by") == "framework":
        return "leave one framework out (" + ", ".join(evaluation.get("fold_names", [])) + ")"
    if evaluation.get("fold_by") == "time":
        return "temporal: per repository, the " + ", ".join(evaluation.get("fold_names", [])) + \
            " tested by a model fitted on the older records"
    repeats = evaluation.get("repeats", 1)
    return f"{evaluation['folds']}-fold cross-validation" + (f", repeated {repeats} times" if repeats > 1 else "")


def _none_apart(evaluation: Mapping[str, Any]) -> list[str]:
    cells = [f"{name} {m['none_apart']['predicted_none']}" for name, p in evaluation["predictors"].items()
             if (m := p["axes"].get("root_cause", {})).get("none_apart")]
    if not cells:
        return []
    n = next(p["axes"]["root_cause"]["none_apart"]["n"] for p in evaluation["predictors"].values()
             if p["axes"].get("root_cause", {}).get("none_apart"))
    return [f"Root cause `none` (reported apart): {n} records with gold `none`; predicted `none` (first "
            f"repetition): {', '.join(cells)}.", ""]


def _data_lines(evaluation: Mapping[str, Any]) -> list[str]:
    test, leakage = evaluation["data"]["test"], evaluation["leakage"]
    base = ", ".join(f"`{Path(p).name}`" for p in evaluation["case_base_files"]) or "nothing else"
    lines = [f"- Test records: {test['records']} of `{evaluation['name']}` (skipped: {test['skipped_lines']} "
             f"bad lines, {test['skipped_no_text']} without text, {test['skipped_duplicate_ids']} duplicate ids)."]
    if evaluation.get("text") == "opened":
        lines.append(f"- As opened: each test record is predicted from its opening post, dated by its header, with "
                     f"only cases opened before it retrieved; {leakage.get('not_scored_without_opening_post', 0)} "
                     "records have no opening post (the window starts mid-thread): they train, but are not scored.")
    if evaluation["mode"] == "transfer":
        lines.append(f"- Case base: all of {base}, minus {leakage['train_dropped_as_copies']} records that copy "
                     "a test record.")
        return lines
    if evaluation.get("fold_by") == "time":
        dropped = leakage["dropped_as_linked_or_near_duplicate_of_a_test_record"]
        lines.append(f"- Case base: the older records plus {base}; first tested day per repository "
                     f"{leakage['first_tested_day']}; {dropped} older records linked to or near-duplicating a test "
                     f"record and {leakage['extra_dropped_per_fold'][0]} extra records copying one left out; "
                     f"{leakage['undated_records_train_only']} undated records only train.")
        return lines
    same = leakage.get("extra_same_id_as_dataset", 0)
    lines += [f"- Case base of each fold: the other folds plus {base} ({evaluation['case_base_rule']}); "
              f"extra records left out as copies of test records, per fold: {leakage['extra_dropped_per_fold']}"
              + (f"; {same} extra records share an id with the dataset and are never used" if same else "") + ".",
              f"- Folds of {leakage['fold_sizes']} records"
              + (f" ({', '.join(evaluation.get('fold_names', []))})" if evaluation.get("fold_by") == "framework"
                 else f"; {leakage.get('cross_reference_links', 0)} cross-reference links; "
                      f"{leakage.get('linked_or_near_duplicate_groups', 0)} groups of linked or near-duplicate "
                      f"records (cosine >= {leakage['near_duplicate_cosine']}, {leakage.get('records_in_groups', 0)} "
                      "records) each kept in one fold") + "."]
    return lines


def _axis_section(evaluation: Mapping[str, Any], axis: str, figures: Mapping[str, list[str]]) -> list[str]:
    predictors = evaluation["predictors"]
    first = next(iter(predictors.values()))["axes"][axis]
    skipped = ", ".join(f"{k} {v}" for k, v in first["skipped"].items()) or "none"
    lines = [f"### {axis}", "", f"{first['n']} records scored; skipped: {skipped}. Threshold t = "
             f"{first['threshold']}.", "",
             f"| predictor | accuracy | macro-F1 | top-{TOP_K} | coverage @ t | precision @ t | curve area |",
             "|---|---|---|---|---|---|---|"]
    for name, predictor in predictors.items():
        m = predictor["axes"][axis]
        lines.append(f"| {name} | {_ci(m['accuracy'], m['accuracy_ci'])} | {_ci(m['macro_f1'], m['macro_f1_ci'])} "
                     f"| {m[f'top{TOP_K}_accuracy']:.3f} | {m['coverage_at_threshold']:.3f} "
                     f"| {_opt(m['precision_at_threshold'])} | {m['curve_area']:.3f} |")
    reference = reference_predictor(list(predictors))
    lines += ["", f"Per class, predictor `{reference}` (every predictor's table is in `results.json`):", "",
              "| class | precision | recall | F1 | support |", "|---|---|---|---|---|"]
    per_class = predictors[reference]["axes"][axis]["per_class"]
    for label, row in sorted(per_class.items(), key=lambda item: (-item[1]["support"], item[0])):
        lines.append(f"| {label} | {row['precision']:.3f} | {row['recall']:.3f} | {row['f1']:.3f} | {row['support']} |")
    lines.append("")
    lines += [f"![{kind} {axis}]({name})" for kind in ("confusion", "f1") for name in figures.get(kind, [])
              if name.endswith(f"-{axis}.png")]
    return [*lines, ""]


def _llm_usage(evaluation: Mapping[str, Any]) -> list[str]:
    used = {n: p["usage"] for n, p in evaluation["predictors"].items() if p.get("usage")}
    if not used:
        return []
    keys = sorted({k for usage in used.values() for k in usage})
    lines = ["### LLM usage (summed over folds)", "", f"| predictor | {' | '.join(keys)} |",
             "|---|" + "---|" * len(keys)]
    lines += [f"| {n} | " + " | ".join(str(u.get(k, "")) for k in keys) + " |" for n, u in used.items()]
    return [*lines, ""]


def _stems(results: Results) -> list[str]:
    stems: list[str] = []
    for evaluation in results["evaluations"]:
        stem = re.sub(r"[^\w.-]+", "-", evaluation["name"].replace(".jsonl", ""))
        stem += "-transfer" if evaluation["mode"] == "transfer" else ""
        stems.append(stem if stem not in stems else f"{stem}-{len(stems)}")
    return stems


def _n(evaluation: Mapping[str, Any], axis: str) -> int:
    return max(int(p["axes"][axis].get("n", 0)) for p in evaluation["predictors"].values())


def _f1_cell(metrics: Mapping[str, Any]) -> str:
    return _ci(metrics["macro_f1"], metrics["macro_f1_ci"]) if metrics.get("n") else "n/a"


def _ci(value: float, interval: Sequence[float]) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _opt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
