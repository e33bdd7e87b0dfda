"""The review page's queue with 1,000 decisions, timed against a bare FastAPI page in the same run.

    python bench/review_page.py [--decisions 1000] [--repeat 5]

Builds a fresh SQLite service database in a temporary directory with N synthetic decisions of one repository
(a comment of the bot's shape: a label table, two precedents, a question, the footer; made-up text), signs in
as the operator, and times GET /review/<repo>?limit=N (the whole queue on one page) and the repository's summary
through the real app (in process, Starlette's TestClient), then a bare FastAPI page returning a fixed HTML
string. Prints the first and the median wall time of each, the median CPU time, and the machine's load."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.testclient import TestClient
from pydantic import SecretStr

from bot.core.settings import AXES, Settings
from bot.service.decisions.models import Decision
from bot.service.queue.store import Store
from bot.service.review.html_cache import keep_html
from bot.service.state import ServiceOptions
from bot.service.web.app import create_app

REPO = "bench-org/bench-repo"
TOKEN = "bench-ops-token"
COMMENT = """<!-- ddl-triage v1 -->
**Likely**: a hang in a collective ({n}); the NCCL watchdog fired after the timeout.

| | |
|---|---|
| Kind | bug report (91%) |
| Stage | training (78%) |
| Symptom | hang / timeout (84%) |

Similar reports: [bench-org/bench-repo#{a}](https://github.com/bench-org/bench-repo/issues/{a}) (fixed by a
patch), [bench-org/bench-repo#{b}](https://github.com/bench-org/bench-repo/issues/{b}).

Could you post the output of `python -m torch.utils.collect_env` and the full traceback of rank 0?

<sub>Automated suggestion by ddl-triage; it changes nothing here. Correct it with `/triage symptom=...`.</sub>"""


def seed(store: Store, n: int) -> None:
    """N decisions stored as the worker stores them (the decision, then its comment rendered)."""
    now = time.time()
    for i in range(n):
        speaks = i % 3 != 2
        decision = Decision(
            delivery_id=f"bench-{i}", repo=REPO, number=i + 1, event="issues", action="opened", shadow=i % 2 == 0,
            posted=speaks and i % 2 == 1, comment_id=i if speaks and i % 2 == 1 else None,
            predictions={axis: {"label": "hang_timeout" if axis == "symptom" else "training", "confidence": 0.8,
                                "top": [], "corrected": False} for axis in AXES},
            neighbours=[{"id": f"pytorch/pytorch#{1000 + i}", "url": "https://github.com/pytorch/pytorch/issues/1",
                         "score": 0.81}],
            comment=COMMENT.format(n=i, a=i + 2, b=i + 3) if speaks else None,
            outcome="comment created" if speaks and i % 2 == 1 else "stored (shadow mode)" if speaks
            else "silent: nothing to add", title=f"Training hangs at step {i} with two nodes",
            reasons=["2 precedents"])
        store.save_decision(decision)
        keep_html(store, [decision])
    with store.transaction() as run:  # spread over ten days, as a queue would be
        for i in range(n):
            run("UPDATE decisions SET created_at = ? WHERE delivery_id = ?", (now - (n - i) * 864.0, f"bench-{i}"))
        for i in range(0, n, 7):  # a correction every seventh issue
            run("INSERT INTO feedback (delivery_id, repo, number, axis, value, author, title, body, created_at) "
                "VALUES (?, ?, ?, 'symptom', 'communication_error', 'bench', 't', 'b', ?)",
                (f"fix-{i}", REPO, i + 1, now))


def timed(get: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    """The first wall time, the median wall time, and the median CPU time of this process (the app runs in it,
    in the test client's thread), which other processes on a busy machine do not inflate."""
    times, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        get()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return times[0], statistics.median(times), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--screenshot", type=Path, help="also save the summary of the synthetic decisions as a PNG "
                        "(headless Chromium, Debian's chromium + chromium-driver)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(state_dir=Path(tmp), database_url=f"sqlite:///{tmp}/service.sqlite3", shadow=True,
                            ops_token=SecretStr(TOKEN))
        store = Store(settings.sqlite_url)
        seed(store, args.decisions)
        store.close()
        app = create_app(settings, options=ServiceOptions(run_worker=False))
        with TestClient(app) as client:
            login = client.get("/review/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', login).group(1)  # type: ignore[union-attr]
            assert client.post("/review/login/ops", data={"csrf": csrf, "token": TOKEN}).status_code == 200

            def queue() -> None:
                page = client.get(f"/review/{REPO}", params={"limit": args.decisions})
                assert page.status_code == 200 and page.text.count('class="card decision"') == args.decisions

            def summary() -> None:
                assert client.get(f"/review/{REPO}/summary").status_code == 200

            queue_times, summary_times = timed(queue, args.repeat), timed(summary, args.repeat)
            if args.screenshot:
                screenshot(settings, args.screenshot)
        bare = FastAPI()
        bare.get("/")(lambda: HTMLResponse("<!doctype html><title>bare</title><p>bare page</p>"))
        with TestClient(bare) as client:
            bare_times = timed(lambda: client.get("/"), args.repeat)
    print(f"load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'page':<40} {'first (s)':>10} {'median (s)':>11} {'median CPU (s)':>15}")
    for name, (first, median, cpu) in ((f"/review queue, {args.decisions} decisions", queue_times),
                                       (f"/review summary, {args.decisions} decisions", summary_times),
                                       ("bare FastAPI page", bare_times)):
        print(f"{name:<40} {first:>10.3f} {median:>11.3f} {cpu:>15.3f}")


def screenshot(settings: Settings, out: Path) -> None:
    """The summary page of the synthetic decisions, served by uvicorn and read by headless Chromium."""
    import threading

    import uvicorn
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    server = uvicorn.Server(uvicorn.Config(create_app(settings, options=ServiceOptions(run_worker=False)),
                                           host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))
    try:
        driver.get(f"http://127.0.0.1:{port}/review/login")
        driver.find_element(By.NAME, "token").send_keys(TOKEN)
        driver.find_element(By.NAME, "token").submit()
        driver.get(f"http://127.0.0.1:{port}/review/{REPO}/summary")
        driver.find_element(By.ID, "plot")
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
        server.should_exit = True
        thread.join()


if __name__ == "__main__":
    main()
