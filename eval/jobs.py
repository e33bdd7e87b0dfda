"""One fit-and-predict job (a predictor on one split), run inline or in worker processes.

Jobs are independent and seeded, so running them in parallel gives the same numbers as running them
one after the other. Workers are spawned (not forked) because the parent may hold a loaded torch model.
A worker ignores Ctrl-C (the terminal sends it to every process of the group: the parent decides) and exits
when its parent is gone; an interrupted or failed run terminates every worker before it returns.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from threadpoolctl import threadpool_limits

from bot.core.settings import Settings
from bot.knowledge.taxonomy import load_taxonomy
from bot.models.embedding import Embedder, EmbeddingCache
from bot.models.engine import Progress, fit_engine
from eval import predictors as _eval_predictors  # noqa: F401  (registers them)
from eval.scoring import Sample, sample_record
from eval.splits import Split

INLINE_ONLY = frozenset({"llm"})  # one model in memory and one answer cache writer: never in a worker
PARENT_POLL_S = 1.0  # how often a worker checks that its parent still runs
STOP_GRACE_S = 5.0  # how long a terminated worker gets before it is killed


@dataclass(frozen=True)
class Job:
    predictor: str
    split: Split
    settings: Settings
    hashes: dict[str, str]  # case id -> sha256 of the text the engine embeds
    fit_cache: bool
    calibrate: bool = True


@dataclass
class JobOutput:
    predictor: str
    fold: int
    repeat: int
    samples: list[Sample]
    fit_s: float
    predict_s: float
    usage: object
    describe: dict[str, object]
    model_id: str
    fitted: bool = True  # False: the fitted model came from the cache (its time says nothing of a fit)


def make_embedder(settings: Settings) -> Embedder:
    return Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))


def run_job(job: Job, embedder: Embedder | None = None, progress: Progress | None = None) -> JobOutput:
    """Fit the engine on the split's case base, exactly as the bot does, and triage its test records.

    BLAS runs single-threaded (except for an LLM, which runs alone): jobs already fill the cores, and
    OpenBLAS threads spinning while another process holds the core made a fit 5 times slower on a busy
    2-core machine (measured). The numbers do not depend on --jobs.
    """
    with threadpool_limits(limits=None if job.predictor in INLINE_ONLY else 1):
        return _fit_and_predict(job, embedder or make_embedder(job.settings), progress)


def _fit_and_predict(job: Job, embedder: Embedder, progress: Progress | None) -> JobOutput:
    clock = time.monotonic()
    fitted = False

    def watch(task: str, advance: int, total: int) -> None:  # the engine says "fitting predictor" on a cache miss
        nonlocal fitted
        fitted = fitted or task == "fitting predictor"
        if progress is not None:
            progress(task, advance, total)

    engine = fit_engine(job.settings, job.split.train, embedder=embedder, predictor_name=job.predictor,
                        taxonomy=load_taxonomy(job.settings.taxonomy), calibrate=job.calibrate, use_cache=job.fit_cache,
                        progress=watch)
    fit_done = time.monotonic()
    results = engine.triage_many(job.split.test, progress=progress)
    samples = [sample_record(case, result, job.split.fold, job.hashes[case.id], job.split.repeat)
               for case, result in zip(job.split.test, results, strict=True)]
    return JobOutput(job.predictor, job.split.fold, job.split.repeat, samples, fit_s=fit_done - clock,
                     predict_s=time.monotonic() - fit_done, usage=getattr(engine.predictor, "usage", None),
                     describe=engine.predictor.describe(), model_id=engine.model_id, fitted=fitted)


def _worker_init(parent: int) -> None:
    """In each worker: Ctrl-C is the parent's to handle, and the worker never outlives the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent,), name="exit-with-parent", daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:  # re-parented: the run was killed without a chance to stop its workers
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def stop_workers(processes: list[multiprocessing.process.BaseProcess]) -> None:
    """Terminate every worker (SIGTERM), then kill the ones still there after the grace period."""
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(STOP_GRACE_S)


class JobRunner:
    """Runs jobs in `workers` spawned processes (inline when 1), reporting each as it finishes."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> JobRunner:
        if self.workers > 1:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_worker_init, initargs=(os.getpid(),))
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self._pool is None:
            return
        if kind is None:
            self._pool.shutdown(cancel_futures=True)
            return
        # Interrupted (Ctrl-C, SIGTERM) or failed: the running jobs' results are not wanted, so their workers
        # are stopped now rather than waited for (a fit can take minutes).
        stop_workers(multiprocessing.active_children())
        self._pool.shutdown(wait=True, cancel_futures=True)  # returns at once: the pool sees its workers gone

    def run(self, jobs: Sequence[Job], embedder: Embedder, progress: Progress | None = None
            ) -> Iterator[tuple[Job, JobOutput]]:
        """(job, output) pairs in the order the jobs finish."""
        pool = self._pool
        futures: dict[Future[JobOutput], Job] = {}
        if pool is not None:
            futures = {pool.submit(run_job, job): job for job in jobs if job.predictor not in INLINE_ONLY}
        for job in jobs:
            if pool is None or job.predictor in INLINE_ONLY:
                yield job, run_job(job, embedder, progress)
        for future in as_completed(futures):
            yield futures[future], future.result()
