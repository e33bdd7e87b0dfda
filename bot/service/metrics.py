"""Prometheus counters of deliveries, jobs, failures and latency, in a registry owned by one app."""

from __future__ import annotations

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Label values come from these fixed sets only: a header is never a label (unsigned junk cannot grow /metrics).
KNOWN_EVENTS = frozenset({"issues", "issue_comment", "ping", "installation", "installation_repositories"})


def event_label(name: str | None) -> str:
    return name if name in KNOWN_EVENTS else "other"


LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)


class Metrics:
    """Every series the service exports; each app instance has its own registry (tests run several)."""

    content_type = prometheus_client.CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.deliveries = Counter("ddl_triage_deliveries", "Webhook deliveries by event and outcome",
                                  ["event", "outcome"], registry=r)
        self.jobs = Counter("ddl_triage_jobs", "Finished job attempts by outcome", ["outcome"], registry=r)
        self.failures = Counter("ddl_triage_job_failures", "Failed job attempts by reason", ["reason"],
                                registry=r)
        self.triage_seconds = Histogram("ddl_triage_triage_seconds", "Engine time per issue", registry=r,
                                        buckets=LATENCY_BUCKETS)
        self.job_seconds = Histogram("ddl_triage_job_seconds", "Time of one job attempt", registry=r,
                                     buckets=LATENCY_BUCKETS)
        self.delivery_to_done_seconds = Histogram(
            "ddl_triage_delivery_to_done_seconds", "From a delivery's receipt to its job's success",
            registry=r, buckets=LATENCY_BUCKETS)
        self.queue = Gauge("ddl_triage_jobs_by_status", "Jobs in the store by status", ["status"], registry=r)
        self.ready = Gauge("ddl_triage_ready", "1 once the case base is loaded", registry=r)

    def render(self, job_counts: dict[str, int]) -> bytes:
        """The text exposition, with the queue gauge read from the store at scrape time."""
        for status in ("queued", "running", "done", "failed"):
            self.queue.labels(status=status).set(job_counts.get(status, 0))
        return prometheus_client.generate_latest(self.registry)
