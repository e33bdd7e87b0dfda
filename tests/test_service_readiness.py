"""Readiness of the web process under `serve` (issue 23): it reflects workers alive and the queue moving, not a
beat between jobs. A worker beats from a thread of its own, so a job longer than the beat window (a history sync
slice, an erasure) leaves the web ready; workers that beat but take no due job make it "stalled"."""

from __future__ import annotations

import time

from bot.core.settings import Settings
from bot.models.engine import Engine
from bot.service.processes import beating
from bot.service.queue.upkeep import worker_beat
from bot.service.queue.worker import Worker
from bot.service.state import Role, build_state
from tests.fake_github import REPO, FakeGitHub, deliver, issue_payload, running_service, state_of, wait_until


def test_a_job_longer_than_the_beat_window_leaves_the_web_ready(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    with running_service(app_settings, engine, run_worker=False) as web:  # the web process: no worker thread
        assert web.get("/healthz/ready").json()["status"] == "loading", "no worker yet"
        worker_state = build_state(app_settings, Role.WORKER, engine=engine)
        worker = Worker(worker_state)
        try:
            with beating(worker_state, worker.worker_id):
                worker.start()
                wait_until(lambda: web.get("/healthz/ready").status_code == 200)
                held = github.hold("GET", f"/repos/{REPO}/issues/42")  # the triage job reads the issue: it waits
                deliver(web, issue_payload(github))
                assert held.arrived.wait(60), "the job did not start"
                window = 3 * app_settings.job_lease_s  # readiness counts workers that beat within this
                started = time.monotonic()
                wait_until(lambda: time.monotonic() > started + window + 1.0, timeout=window + 10)
                answer = web.get("/healthz/ready")
                assert answer.status_code == 200 and answer.json()["workers"] == 1, answer.json()
                assert state_of(web).store.job_counts() == {"running": 1}, "still in the one long job"
                held.release()
                wait_until(lambda: state_of(web).store.job_counts() == {"done": 1})
        finally:
            worker.stop(10.0)
            worker_state.close()


def test_workers_that_beat_but_take_no_due_job_make_the_web_stalled(
        app_settings: Settings, engine: Engine, github: FakeGitHub) -> None:
    settings = app_settings.model_copy(update={"queue_stall_s": 0.5})
    with running_service(settings, engine, run_worker=False) as web:
        store = state_of(web).store

        def status() -> str:
            worker_beat(store, "stuck-worker", ready=True)  # it beats, but its loop never claims a job
            return str(web.get("/healthz/ready").json()["status"])

        assert status() == "ok", "nothing waits yet"
        deliver(web, issue_payload(github))
        wait_until(lambda: status() == "stalled")
        answer = web.get("/healthz/ready")
        assert answer.status_code == 503 and answer.json()["queue_wait_s"] >= 0.5
        assert "no job runs" in web.get("/healthz/details").json()["error"]
        claimed = store.claim_job(lease_s=60.0)  # a worker takes it: the queue moves again
        assert claimed is not None
        assert status() == "ok"
