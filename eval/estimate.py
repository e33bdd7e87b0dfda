"""How long a run will take, said before it starts.

Per predictor, the seconds one fit-and-predict job took on this machine (the median of the jobs that fitted
anew in earlier runs, kept in STATE_DIR/cache/eval-job-seconds.json, keyed by calibration and worker count),
else the average job of the reference runs on the project's 2-core machine. A job whose model comes from the fit cache
takes seconds, so a rerun is much shorter than said; embedding texts not yet cached comes on top.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Iterable
from pathlib import Path

from eval.jobs import JobOutput

log = logging.getLogger(__name__)

FILE = "eval-job-seconds.json"
# Seconds per fit-and-predict job, per worker, on the project's 2-core machine with its other work quiet, averaged
# over the ddl-dev-cv predictors (about 390 cases per case base): calibrated, the task's 175 jobs on 2 workers in
# 28 min (issue #24's run); uncalibrated, the same jobs in 832 s (the benchmark page's run, 2026-11-26). A machine
# busy with other work is slower (the quick run of 2026-11-27 under a load average of 20-26 took 3-20 times this
# per job), so the first run here is the one to trust: its own figures replace these.
REFERENCE_JOB_S = {True: 19.2, False: 9.5}  # calibrated -> seconds


def _key(predictor: str, calibrate: bool, workers: int) -> str:
    return f"{predictor}|{'calibrated' if calibrate else 'raw'}|{workers}"


def load_timings(cache_dir: Path) -> dict[str, float]:
    try:
        raw = json.loads((cache_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def job_seconds(timings: dict[str, float], predictor: str, calibrate: bool, workers: int) -> tuple[float, bool]:
    """(seconds, measured here) for one job of `predictor`."""
    if (known := timings.get(_key(predictor, calibrate, workers))) is not None:
        return known, True
    return REFERENCE_JOB_S[calibrate], False


def estimate_s(cache_dir: Path, jobs: Iterable[str], calibrate: bool, workers: int) -> tuple[float, bool]:
    """(wall-clock seconds, every figure measured here) of running `jobs` (their predictors' names)."""
    timings = load_timings(cache_dir)
    figures = [job_seconds(timings, name, calibrate, workers) for name in jobs]
    return sum(s for s, _ in figures) / max(1, workers), all(here for _, here in figures)


def describe_estimate(cache_dir: Path, jobs: list[str], calibrate: bool, workers: int) -> str:
    seconds, here = estimate_s(cache_dir, jobs, calibrate, workers)
    source = "earlier runs on this machine" if here else "the reference 2-core machine"
    return (f"eval: {len(jobs)} fit-and-predict jobs on {workers} worker(s): about {_minutes(seconds)} with every "
            f"model fitted anew (from {source}); a rerun with the fitted models cached takes far less. Ctrl-C stops "
            "it and its workers.")


def record_timings(cache_dir: Path, outputs: Iterable[JobOutput], calibrate: bool, workers: int) -> None:
    """Keep the median seconds of this run's freshly fitted jobs per predictor, for the next estimate."""
    by_predictor: dict[str, list[float]] = {}
    for output in outputs:
        if output.fitted:
            by_predictor.setdefault(output.predictor, []).append(output.fit_s + output.predict_s)
    if not by_predictor:
        return
    timings = load_timings(cache_dir)
    timings.update({_key(name, calibrate, workers): round(statistics.median(seconds), 2)
                    for name, seconds in by_predictor.items()})
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        (cache_dir / FILE).write_text(json.dumps(timings, indent=1, sort_keys=True), encoding="utf-8")
    except OSError as exc:  # an estimate is a convenience: never a reason for a run to fail
        log.warning("could not keep the job timings in %s: %s", cache_dir / FILE, exc)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
