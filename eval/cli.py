"""`python -m eval`: run, report, describe, validate and list the benchmarks; measure the floor and the diagnostics."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from bot.core.errors import ConfigError, TriageError
from bot.core.paths import default_data_dir
from bot.core.settings import AXES, Settings
from bot.models.predictors import predictor_names
from eval.measures_cli import diagnostics, floor, signatures
from eval.task import RunConfig, default_predictors, load_task, task_config

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Benchmarks of ddl-triage on the gold datasets, with the bot's own engine.")

MAX_DEFAULT_WORKERS = 8  # each worker holds its own copy of the case base and scikit-learn
LLM_HINT = ("the llm predictor needs a backend: set DDL_TRIAGE_LLM (openai:MODEL with DDL_TRIAGE_LLM_API_KEY or "
            "DDL_TRIAGE_LLM_BASE_URL, or local:/path/to/model)")
TEXT_TITLES = {"opened": "as opened", "thread": "whole thread: an upper bound, not what the App sees"}
for measure in (floor, diagnostics, signatures):  # the measures behind the README's tables: eval/measures_cli.py
    app.command()(measure)


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"eval: error: {message}", file=sys.stderr)
    sys.exit(code)


def load_settings() -> Settings:
    """The bot's settings; researchers' data directory defaults to ../shared/data/gold beside the checkout."""
    try:
        settings = Settings()
        return settings if settings.data_dir else settings.model_copy(update={"data_dir": default_data_dir()})
    except ValidationError as exc:
        err = exc.errors()[0]
        fail(f"invalid setting DDL_TRIAGE_{str(err['loc'][0]).upper()}: {err['msg']}")


@app.command()
def run(
    out: Annotated[Path, typer.Option(help="Directory for results.json, report.md and the PNG plots.")],
    task: Annotated[str | None, typer.Option(help="A benchmark definition of eval/tasks (see `ls`).")] = None,
    dataset: Annotated[list[Path] | None, typer.Option(help="Gold JSONL to test on (repeatable).")] = None,
    extra_cases: Annotated[list[Path] | None, typer.Option(
        help="Added to every fold's case base, never to a test part (repeatable). Default for ddl-dev.jsonl: "
             "liu23.jsonl of the same directory.")] = None,
    no_extra_cases: Annotated[bool, typer.Option("--no-extra-cases",
                                                 help="No extra cases, not even the default.")] = False,
    train_on: Annotated[list[Path] | None, typer.Option(
        help="Transfer: all of these files are the case base and every --dataset is tested whole (no folds).")] = None,
    predictors: Annotated[str | None, typer.Option(
        help="Comma-separated predictor names (default: majority,tfidf,knn,linear,default, plus llm when "
             "DDL_TRIAGE_LLM is set).")] = None,
    folds: Annotated[int | None, typer.Option(help="Cross-validation folds (default 5).")] = None,
    repeats: Annotated[int | None, typer.Option(
        help="Repetitions of the cross-validation, each with its own folds (seed + r); default 1, or the task's.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of folds, calibration and bootstrap (default 0).")] = None,
    bootstrap: Annotated[int | None, typer.Option(help="Bootstrap resamples (default 1000).")] = None,
    jobs: Annotated[int, typer.Option(
        help="Worker processes (default: CPU count, at most 8). Same numbers at any value.")] = 0,
    fit_cache: Annotated[bool, typer.Option(help="Reuse fitted predictors cached by content.")] = True,
    baseline: Annotated[str | None, typer.Option(
        help="The predictor every other one is compared with in the paired table (default: linear).")] = None,
    calibrate: Annotated[bool, typer.Option(
        help="Calibrate each fold's confidences (5 more fits per fold). --no-calibrate keeps accuracy, macro-F1 "
             "and the paired table, for cheap exploration; coverage, ECE and Brier then mean nothing.")] = True,
    text: Annotated[str | None, typer.Option(
        help="What each test record is predicted from: `opened` (default: its opening post, dated, as the App "
             "sees it; records without one train but are not scored) or `thread` (the whole window: an upper "
             "bound, reported apart).")] = None,
    train_text: Annotated[str | None, typer.Option(
        help="What the case bases learn from: `opened` (each case cut to its opening post; windows without one "
             "keep their text) or `thread` (each window as stored). Default: DDL_TRIAGE_CASE_TEXT, else "
             "opened.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
    quick: Annotated[bool, typer.Option(
        "--quick", help="One repetition of the cross-validation (--repeats 1), whatever the task says.")] = False,
) -> None:
    """Cross-validate (or transfer) every predictor and write results.json, report.md and plots."""
    from eval.estimate import describe_estimate
    from eval.progress import Reporter
    from eval.report import headline_table, write_outputs
    from eval.runner import job_predictors, run_benchmark

    if quick and repeats not in (None, 1):
        raise ConfigError(f"--quick runs one repetition; drop --repeats {repeats} or --quick")
    settings = load_settings()
    config = build_config(settings, task=task, dataset=dataset, extra_cases=extra_cases,
                          no_extra_cases=no_extra_cases, train_on=train_on, predictors=predictors, folds=folds,
                          seed=seed, bootstrap=bootstrap, fit_cache=fit_cache, repeats=1 if quick else repeats,
                          baseline=baseline, calibrate=calibrate, text=text, train_text=train_text)
    planned = job_predictors(config)
    workers = max(1, min(jobs or min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS), len(planned)))
    print(describe_estimate(settings.cache_dir, planned, config.calibrate, workers), file=sys.stderr, flush=True)
    with Reporter(len(planned), enabled=not quiet) as reporter:
        results = run_benchmark(config, settings, reporter, workers=workers,
                                command=shlex.join(["python", "-m", "eval", *sys.argv[1:]]))
    written = write_outputs(results, out)
    for evaluation in results["evaluations"]:
        mode = {"time": "temporal", "framework": "leave one framework out"}.get(evaluation["fold_by"],
                                                                               evaluation["mode"])
        print(f"## {evaluation['name']} ({mode}, {TEXT_TITLES[evaluation['text']]}): "
              "macro-F1 [95% CI]\n")
        print("\n".join(headline_table(evaluation)) + "\n")
        _say_skipped(evaluation)
    print(f"eval: wrote {len(written)} files to {out} in {results['duration_s']} s", file=sys.stderr)


def build_config(settings: Settings, *, task: str | None, dataset: list[Path] | None,
                 extra_cases: list[Path] | None, no_extra_cases: bool, train_on: list[Path] | None,
                 predictors: str | None, folds: int | None, seed: int | None, bootstrap: int | None,
                 fit_cache: bool, repeats: int | None = None, baseline: str | None = None,
                 calibrate: bool = True, text: str | None = None, train_text: str | None = None) -> RunConfig:
    """The RunConfig of a definition (if any) with the command-line flags applied on top."""
    overrides: dict[str, Any] = {}
    if dataset:
        overrides["datasets"] = tuple(dataset)
    if extra_cases or no_extra_cases:
        overrides["extra_cases"] = () if no_extra_cases else tuple(extra_cases or ())
    if train_on:
        overrides["train_on"] = tuple(train_on)
    if predictors:
        overrides["predictors"] = tuple(p.strip() for p in predictors.split(",") if p.strip())
    for key, value in {"folds": folds, "seed": seed, "bootstrap_resamples": bootstrap, "repeats": repeats,
                       "baseline": baseline, "text": text, "train_text": train_text}.items():
        if value is not None:
            overrides[key] = value
    names = (*overrides.get("predictors", ()), *([baseline] if baseline else []))
    if unknown := [n for n in names if n not in predictor_names()]:
        raise ConfigError(f"unknown predictors {unknown}; choose from {predictor_names()} (--predictors)")
    if "llm" in names and not settings.llm:
        raise ConfigError(LLM_HINT)
    try:
        if task:
            base = task_config(load_task(task), settings.data_dir, bool(settings.llm))
            merged = {**base.model_dump(), **overrides, "overrides": tuple(sorted(overrides)), "fit_cache": fit_cache,
                      "calibrate": calibrate}
            return _with_baseline(RunConfig.model_validate(merged))
        if not dataset:
            raise ConfigError("give --dataset PATH (a gold JSONL file) or --task NAME (python -m eval ls)")
        return _with_baseline(RunConfig.model_validate({"predictors": default_predictors(bool(settings.llm)),
                                                        **overrides, "fit_cache": fit_cache, "calibrate": calibrate}))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}") from None


def _with_baseline(config: RunConfig) -> RunConfig:
    """The baseline runs beside the others: added first to the predictors when not named among them."""
    if config.baseline in config.predictors:
        return config
    return config.model_copy(update={"predictors": (config.baseline, *config.predictors)})


def _say_skipped(evaluation: dict[str, Any]) -> None:
    first = next(iter(evaluation["predictors"].values()))["axes"]
    skipped = [f"{axis} {m['skipped_total']} ({', '.join(f'{k} {v}' for k, v in m['skipped'].items())})"
               for axis, m in first.items() if m["skipped_total"]]
    test = evaluation["data"]["test"]
    unscored = evaluation["leakage"].get("not_scored_without_opening_post", 0)
    if evaluation.get("text") == "opened":
        print(f"eval: {evaluation['name']}: as opened: {unscored} records without an opening post train but are "
              "not scored", file=sys.stderr)
    print(f"eval: {evaluation['name']}: {test['records']} records tested; skipped {test['skipped_lines']} bad lines, "
          f"{test['skipped_no_text']} without text, {test['skipped_duplicate_ids']} duplicate ids; not scored: "
          + ("; ".join(skipped) or "none"), file=sys.stderr)


@app.command()
def report(
    directory: Annotated[Path, typer.Argument(help="A run's output directory (holding results.json).")],
    rescore: Annotated[bool, typer.Option(help="Recompute the metrics, paired table and slices from the stored "
                                          "per-sample answers under today's scoring rules (rewrites results.json)."
                                          )] = False,
) -> None:
    """Re-render report.md and the plots from results.json, without running anything."""
    from eval.report import write_outputs
    from eval.rescore import rescore as rescore_results

    results = read_results(directory)
    if rescore:
        results = rescore_results(results)
    written = write_outputs(results, directory)
    print(f"eval: wrote {len(written)} files to {directory}", file=sys.stderr)


def _evaluation(results: dict[str, Any], directory: Path) -> dict[str, Any]:
    """The first evaluation of a stored run, or a one-line error naming the file and the missing field."""
    try:
        evaluation: dict[str, Any] = results["evaluations"][0]
        evaluation["predictors"]
    except (KeyError, IndexError, TypeError):
        fail(f"{directory / 'results.json'}: no evaluations[0].predictors: not the results.json of `eval run`")
    return evaluation


def _run_taxonomy(results: dict[str, Any]) -> str:
    """The taxonomy a stored run was scored with (runs record it in their settings; ddl-v1 otherwise)."""
    return str(results.get("config", {}).get("settings", {}).get("taxonomy", "ddl-v1"))


def read_results(directory: Path) -> dict[str, Any]:
    """A stored run's results.json, or a one-line error naming the file."""
    path = directory / "results.json"
    try:
        results: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        fail(f"{path}: cannot read: {exc.strerror}")
    except json.JSONDecodeError as exc:
        fail(f"{path}:{exc.lineno}: not JSON ({exc.msg})")
    return results


@app.command()
def thresholds(
    directory: Annotated[Path, typer.Argument(help="A run's output directory (holding results.json).")],
    predictor: Annotated[str, typer.Option(help="Whose labels are scored.")] = "linear-structured",
    source: Annotated[str | None, typer.Option(
        help="Report on the records of this gold file only (default ddl-dev.jsonl, the natural mix; `all` for "
             "every scored record).")] = "ddl-dev.jsonl",
) -> None:
    """The fixed axis thresholds against thresholds re-chosen inside the folds (nested): how much the fixed
    choice flatters the shown-label accuracy and coverage of a stored run."""
    from bot.knowledge.taxonomy import load_taxonomy
    from eval.thresholds import format_table, select_run

    results = read_results(directory)
    _evaluation(results, directory)
    try:
        selections = select_run(results, predictor, load_taxonomy(_run_taxonomy(results)),
                                None if source == "all" else source)
    except KeyError as exc:
        fail(f"{directory / 'results.json'}: missing field {exc.args[0]}")
    except ValueError as exc:
        fail(f"{directory / 'results.json'}: {exc.args[0]}")
    print(f"{directory}: {predictor}, records of {source}; utility per record: +1 a right label shown, -cost a "
          "wrong one, 0 silence")
    print(format_table(selections))


@app.command()
def compare(
    first: Annotated[Path, typer.Argument(help="A run's output directory (holding results.json).")],
    second: Annotated[Path, typer.Argument(help="Another run of the same records (e.g. other --train-text).")],
    predictor: Annotated[str, typer.Option(help="The predictor compared across the two runs.")] = "linear-structured",
    source: Annotated[str, typer.Option(
        help="Compare on the records of this gold file only (`all`: every scored record).")] = "ddl-dev.jsonl",
) -> None:
    """One predictor in two stored runs of the same records: FIRST - SECOND per axis, with paired intervals."""
    from bot.knowledge.taxonomy import load_taxonomy
    from eval.paired import compare_axis

    samples, taxonomies = [], set()
    for directory in (first, second):
        results = read_results(directory)
        predictors = _evaluation(results, directory)["predictors"]
        if predictor not in predictors:
            fail(f"{directory / 'results.json'}: predictor {predictor!r} is not in this run; it has "
                 f"{sorted(predictors)}")
        samples.append([s for s in predictors[predictor]["samples"] if source == "all" or s.get("source") == source])
        taxonomies.add(_run_taxonomy(results))
    if len(taxonomies) > 1:
        fail(f"{first} and {second} use other taxonomies ({sorted(taxonomies)}); compare runs of one task")
    ids = [sorted((s.get("repeat", 0), s["id"]) for s in run) for run in samples]
    if ids[0] != ids[1]:
        fail(f"{first} and {second} did not predict the same records (or repetitions): {len(ids[0])} and "
             f"{len(ids[1])} record-repetitions of {source}; compare runs of one task and one --repeats")
    taxonomy = load_taxonomy(taxonomies.pop())
    print(f"{predictor}: {first} - {second}, records of {source}; 95% paired bootstrap (1,000 resamples)\n")
    print("| axis | records | accuracy diff [95% CI] | macro-F1 diff [95% CI] |\n|---|---|---|---|")
    for axis in AXES:
        try:
            diff = compare_axis(samples[0], samples[1], axis, taxonomy, seed=0, resamples=1000)
        except ValueError as exc:
            fail(f"{first} and {second} did not score the same records ({exc}); compare runs of one task")
        if diff is None:
            print(f"| {axis} | 0 | - | - |")
            continue
        acc, f1 = diff["accuracy_diff_ci"], diff["macro_f1_diff_ci"]
        print(f"| {axis} | {diff['n']} | {diff['accuracy_diff']:+.3f} [{acc[0]:+.3f}, {acc[1]:+.3f}] | "  # type: ignore[index]
              f"{diff['macro_f1_diff']:+.3f} [{f1[0]:+.3f}, {f1[1]:+.3f}] |")  # type: ignore[index]


@app.command()
def describe(
    dataset: Annotated[Path, typer.Option(help="A labelled JSONL file (e.g. liu23-labels.jsonl).")],
    taxonomy: Annotated[str, typer.Option(
        help="ddl-v1 (the records' labels), liu23 (the study's native labels) or auto (liu23 when every record "
             "carries native labels).")] = "auto",
    out: Annotated[Path | None, typer.Option(help="Also write the tables (.md) and heatmaps (.png) here.")] = None,
) -> None:
    """The studies' descriptive tables: stages, symptoms within stage, symptom -> fix pattern, shares."""
    from eval.describe import describe_file

    text = describe_file(dataset, taxonomy, out)
    print(text)


@app.command()
def validate(
    data_dir: Annotated[Path | None, typer.Option(help="Gold data directory (DDL_TRIAGE_DATA_DIR).")] = None,
    dataset: Annotated[list[Path] | None, typer.Option(help="Check only these files (repeatable).")] = None,
) -> None:
    """Check every dataset, taxonomy and benchmark definition, without running a model."""
    from eval.validate import validate_all

    settings = load_settings()
    problems, checked = validate_all(data_dir or settings.data_dir, dataset)
    for line in checked:
        print(line)
    for problem in problems:
        print(f"eval: error: {problem}", file=sys.stderr)
    if problems:
        fail(f"{len(problems)} problem(s), listed above")


@app.command()
def comments(
    out: Annotated[Path, typer.Option(help="Directory for results.json, comments.jsonl and comments.md.")],
    task: Annotated[str, typer.Option(help="The benchmark whose folds are commented (its first repetition).")
                    ] = "ddl-dev-cv",
    fit_cache: Annotated[bool, typer.Option(help="Reuse fitted engines cached by content.")] = True,
    memory: Annotated[bool, typer.Option("--memory", help="Give each issue the repository memory of the gold "
                                         "threads of its repository opened before it (the deployed App).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """The comments the bot would post on each fold's issues as opened, by an engine fitted without them."""
    from eval.comments import count_folds, run_comments, write_comment_outputs
    from eval.progress import Reporter

    settings = load_settings()
    config = build_config(settings, task=task, dataset=None, extra_cases=None, no_extra_cases=False,
                          train_on=None, predictors="default", folds=None, seed=None, bootstrap=None,
                          fit_cache=fit_cache, repeats=1)
    with Reporter(count_folds(config), enabled=not quiet) as reporter:
        results = run_comments(config, settings, reporter, shlex.join(["python", "-m", "eval", *sys.argv[1:]]),
                               memory=memory)
    written = write_comment_outputs(results, out)
    print(written[-1].read_text(encoding="utf-8"))
    print(f"eval: wrote {len(written)} files to {out} in {results['duration_s']} s", file=sys.stderr)


@app.command("ls")
def list_tasks() -> None:
    """The benchmark definitions (eval/tasks/*.yaml)."""
    from eval.task import load_task_file, task_files

    print("| task | version | mode | datasets | case base | folds | repeats | seed | predictors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in task_files():
        t = load_task_file(path)
        mode = "transfer" if t.train_on else {"framework": "leave one framework out",
                                              "time": "temporal (newest 20% per repository)"}.get(t.fold_by, "cv")
        base = ", ".join(t.train_on) if t.train_on else "other folds + " + (", ".join(t.extra_cases or ()) or "-")
        print(f"| {t.name} | {t.version} | {mode} | {', '.join(t.datasets)} | {base} | "
              f"{'-' if t.train_on or t.fold_by != 'groups' else t.folds} | {t.repeats} | {t.seed} | "
              f"{', '.join(t.predictors)} |")


class Stopped(BaseException):
    """Ctrl-C or SIGTERM: unwinds the run (which stops its workers) past click's own handling of Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


def main() -> None:
    """Entry point: domain errors become one line on stderr and a non-zero exit, never a traceback."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop)
    try:
        app(standalone_mode=True)
    except TriageError as exc:
        fail(str(exc))
    except (KeyboardInterrupt, Stopped) as exc:
        how = "terminated" if getattr(exc, "signum", signal.SIGINT) == signal.SIGTERM else "interrupted"
        fail(f"{how}: stopped, with every worker process", 128 + getattr(exc, "signum", signal.SIGINT))
    except Exception as exc:  # the catch-all of the CLI boundary
        logging.getLogger(__name__).debug("internal error", exc_info=True)
        fail(f"internal error ({type(exc).__name__}: {exc}); please report it with the command you ran", 70)
