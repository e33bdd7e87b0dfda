"""Prometheus counters of deliveries, jobs, failures and latency, exported from every process.

Under `serve` (a web process and worker processes) prometheus_client's multiprocess mode is on
(`PROMETHEUS_MULTIPROC_DIR`, see `metrics_files.py`): each process writes its series to files there, and
the web process's `/metrics` merges every process's. Without it (one process: the tests' harness) each app
instance has its own registry."""

from __future__ import annotations

import os

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess

from bot.service.metrics_files import MULTIPROC_VARIABLE

# Label values come from these fixed sets only: a header is never a label (unsigned junk cannot grow /metrics).
KNOWN_EVENTS = frozenset({"issues", "issue_comment", "ping", "installation", "installation_repositories"})


def event_label(name: str | None) -> str:
    return name if name in KNOWN_EVENTS else "other"


LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)


class Metrics:
    """Every series the service exports; each app instance has its own registry (tests run several)."""

    content_type = prometheus_client.CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        # Read once, as prometheus_client itself does at import: the mode of every series of this process.
        self.shared_dir = os.environ.get(MULTIPROC_VARIABLE) or None
        self.registry = CollectorRegistry()
        r = self.registry
        self.deliveries = Counter("ddl_triage_deliveries", "Webhook deliveries by event and outcome",
                                  ["event", "outcome"], registry=r)
        self.jobs = Counter("ddl_triage_jobs", "Finished job attempts by outcome", ["outcome"], registry=r)
        self.comments = Counter("ddl_triage_comments", "Triage jobs by what became of the comment (created, "
                                "edited, unchanged, shadow, silent_...)", ["outcome"], registry=r)
        self.failures = Counter("ddl_triage_job_failures", "Failed job attempts by reason", ["reason"],
                                registry=r)
        self.triage_seconds = Histogram("ddl_triage_triage_seconds", "Engine time per issue", registry=r,
                                        buckets=LATENCY_BUCKETS)
        self.job_seconds = Histogram("ddl_triage_job_seconds", "Time of one job attempt", registry=r,
                                     buckets=LATENCY_BUCKETS)
        self.delivery_to_done_seconds = Histogram(
            "ddl_triage_delivery_to_done_seconds", "From a delivery's receipt to its job's success",
            registry=r, buckets=LATENCY_BUCKETS)
        # Set by the web process at scrape time; across processes, the live processes' latest value.
        self.queue = Gauge("ddl_triage_jobs_by_status", "Jobs in the store by status", ["status"], registry=r,
                           multiprocess_mode="livemostrecent")
        self.ready = Gauge("ddl_triage_ready", "1 once a process that runs jobs has its case base loaded",
                           registry=r, multiprocess_mode="livemostrecent")

    def render(self, job_counts: dict[str, int], ready: bool) -> bytes:
        """The text exposition (every process's series under `serve`), with the queue gauge read from the
        store and readiness (a worker, here or in a worker process, has its engine) at scrape time."""
        for status in ("queued", "running", "done", "failed", "superseded"):
            self.queue.labels(status=status).set(job_counts.get(status, 0))
        self.ready.set(1 if ready else 0)
        if self.shared_dir is None:
            return prometheus_client.generate_latest(self.registry)
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=self.shared_dir)
        return prometheus_client.generate_latest(merged)
