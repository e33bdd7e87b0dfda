"""`python -m eval run` stops on Ctrl-C (SIGINT) and on SIGTERM with every worker process, and says how long it
will take before it starts. A real run of the README's researcher command on the gold data (`--quick`, two
workers, no fit cache so that the jobs are long), interrupted once a first job has finished and the workers
fit the next ones."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bot.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 60.0  # generous: the run must stop "within seconds"; a loaded 2-core machine gets slack

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")


def children_of(pid: int) -> set[int]:
    """Every live descendant of `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Run:
    """`python -m eval run --task ddl-dev-cv --quick` in the background, its stderr collected line by line."""

    def __init__(self, settings: Settings, tmp_path: Path) -> None:
        state = tmp_path / "state"
        (state / "cache").mkdir(parents=True)
        cached = settings.cache_dir / "embeddings.sqlite3"  # the gold texts are embedded once per test session
        if cached.is_file():
            shutil.copy(cached, state / "cache" / "embeddings.sqlite3")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DDL_TRIAGE_")} | {
            "DDL_TRIAGE_STATE_DIR": str(state), "DDL_TRIAGE_DATA_DIR": str(settings.data_dir), "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "eval", "run", "--task", "ddl-dev-cv", "--quick", "--jobs", "2", "--no-fit-cache",
             "--out", str(tmp_path / "out")], cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
            text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def wait_for_workers(self) -> set[int]:
        """The run's processes once its workers are at work: a first job has finished, the others run."""
        deadline = time.monotonic() + 600
        while not any(line.startswith("[1/") for line in self.lines):
            assert self.process.poll() is None, "".join(self.lines)
            assert time.monotonic() < deadline, "no job finished"
            time.sleep(0.2)
        found = children_of(self.process.pid)
        assert len(found) >= 2, found  # two workers (and multiprocessing's resource tracker)
        return found

    def stop_with(self, signum: int) -> tuple[int, set[int]]:
        """Send `signum` once the workers run; (exit code, the descendants still alive afterwards)."""
        workers = self.wait_for_workers()
        self.process.send_signal(signum)
        code = self.process.wait(DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S  # each worker is reaped by the run; re-parented ones exit too
        while (left := {pid for pid in workers if alive(pid)}) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.reader.join(10)
        return code, left


@pytest.mark.parametrize(("signum", "code", "said"), [(signal.SIGINT, 130, "interrupted"),
                                                      (signal.SIGTERM, 143, "terminated")])
def test_a_signal_stops_the_run_and_every_worker(settings: Settings, tmp_path: Path, signum: int,
                                                 code: int, said: str) -> None:
    run = Run(settings, tmp_path)
    try:
        exit_code, left = run.stop_with(signum)
    finally:
        if run.process.poll() is None:
            run.process.kill()
    stderr = "".join(run.lines)
    assert exit_code == code, stderr
    assert not left, f"worker processes left running: {sorted(left)}"
    assert said in stderr and "Traceback" not in stderr, stderr
    # It said, before starting, how long it would take.
    assert "eval: 35 fit-and-predict jobs on 2 worker(s): about" in stderr, stderr
    assert not (tmp_path / "out" / "results.json").exists()


def test_the_estimate_learns_this_machine_s_job_times_from_fresh_fits_only(tmp_path: Path) -> None:
    from eval.estimate import REFERENCE_JOB_S, describe_estimate, estimate_s, record_timings
    from eval.jobs import JobOutput

    def output(predictor: str, seconds: float, fitted: bool) -> JobOutput:
        return JobOutput(predictor, 0, 0, [], fit_s=seconds - 1, predict_s=1, usage=None, describe={}, model_id="m",
                         fitted=fitted)

    jobs = ["linear"] * 4 + ["knn"] * 2
    assert estimate_s(tmp_path, jobs, True, 2) == (pytest.approx(6 * REFERENCE_JOB_S[True] / 2), False)
    record_timings(tmp_path, [output("linear", 30, True), output("linear", 50, True), output("linear", 40, True),
                              output("linear", 1, False)], calibrate=True, workers=2)  # a cache hit is no fit time
    seconds, here = estimate_s(tmp_path, jobs, True, 2)
    assert (seconds, here) == (pytest.approx((4 * 40 + 2 * REFERENCE_JOB_S[True]) / 2), False)  # knn never timed here
    record_timings(tmp_path, [output("knn", 10, True)], calibrate=True, workers=2)
    assert estimate_s(tmp_path, jobs, True, 2) == (pytest.approx((4 * 40 + 2 * 10) / 2), True)
    assert "about 2 min" in describe_estimate(tmp_path, jobs, True, 2)
    assert "earlier runs on this machine" in describe_estimate(tmp_path, jobs, True, 2)
    assert estimate_s(tmp_path, jobs, False, 2)[1] is False  # uncalibrated runs are timed apart
