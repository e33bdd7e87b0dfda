"""Webhook front door under load: N signed `issues.opened` deliveries at concurrency C over raw keep-alive
connections (asyncio streams: a pooled client queues on its own at this concurrency), sent to
`ddl-triage serve` and, in the same run, to a bare FastAPI app that checks the signature and answers 202.

For each setup (SQLite, one replica; PostgreSQL, two replicas on one database, each with one worker process)
it prints ack p50/p99 for the service and the bare app and their ratio, the time until every comment exists
on the fake GitHub (run in its own process), lost and doubled comments, dropped connections, and the RSS
of the web and worker processes, and the CPU time the answering processes spent per delivery (which a
busy machine disturbs less than latency). It does so for `--rounds` rounds on fresh issues (bare app, then
the service, then wait for the round's comments) and prints the median p99 ratio. The fake's write pacing
is off (1,000 comments at 1/s would take 17 min).

    python bench/webhook_load.py [--deliveries 1000] [--concurrency 200] [--rounds 3] [--setups sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.service.web.signature import sign_body  # noqa: E402
from tests.fake_github import SECRET  # noqa: E402

UVICORN_FAST = ["--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeGitHubProcess:
    """The fake GitHub in a child process; `counts` follows its comment counts."""

    def __init__(self, deliveries: int, workdir: Path) -> None:
        self.payloads = workdir / "payloads.jsonl"
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fake_github_process.py"),
                                      str(deliveries), str(self.payloads)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.info: dict[str, Any] = json.loads(self.proc.stdout.readline())
        self.counts: dict[str, Any] = {"issues": 0, "comments": 0, "doubled": 0, "t": time.time()}
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.counts = json.loads(line)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def requests_for(payloads: Path) -> list[bytes]:
    raw = []
    for line in payloads.read_text(encoding="utf-8").splitlines():
        body = line.encode()
        head = (f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nX-GitHub-Event: issues\r\nX-GitHub-Delivery: {uuid.uuid4()}\r\n"
                f"X-Hub-Signature-256: {sign_body(SECRET, body)}\r\nUser-Agent: GitHub-Hookshot/bench\r\n\r\n")
        raw.append(head.encode() + body)
    return raw


async def _read_response(reader: asyncio.StreamReader) -> int:
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def send_all(ports: list[int], requests: list[bytes], concurrency: int) -> dict[str, Any]:
    """Each of `concurrency` connections sends its share of `requests` one after another (keep-alive)."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    dropped = 0
    pending = list(reversed(requests))

    async def connection(k: int) -> None:
        nonlocal dropped
        port = ports[k % len(ports)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while pending:
            request = pending.pop()
            started = time.perf_counter()
            try:
                writer.write(request)
                await writer.drain()
                status = await _read_response(reader)
            except (ConnectionError, asyncio.IncompleteReadError, IndexError, ValueError):
                dropped += 1
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            latencies.append(time.perf_counter() - started)
            statuses[status] = statuses.get(status, 0) + 1
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(connection(k) for k in range(concurrency)))
    latencies.sort()
    return {"p50_ms": 1000 * statistics.median(latencies), "p99_ms": p99_ms(latencies), "latencies": latencies,
            "statuses": statuses, "dropped": dropped, "seconds": time.perf_counter() - started}


def p99_ms(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return 1000 * ordered[int(0.99 * len(ordered)) - 1]


def run_load(ports: list[int], requests: list[bytes], concurrency: int) -> dict[str, Any]:
    try:
        import uvloop

        return uvloop.run(send_all(ports, requests, concurrency))
    except ImportError:
        return asyncio.run(send_all(ports, requests, concurrency))


def timed_load(procs: list[subprocess.Popen[bytes]], ports: list[int], requests: list[bytes],
               concurrency: int) -> dict[str, Any]:
    """`run_load`, plus the CPU time the answering processes spent per delivery (their own, not their
    children's): a figure that a busy machine disturbs less than latency."""
    handles = [psutil.Process(proc.pid) for proc in procs]

    def cpu() -> float:
        return sum(sum(handle.cpu_times()[:2]) for handle in handles)

    before = cpu()
    result = run_load(ports, requests, concurrency)
    return result | {"cpu_ms": 1000 * (cpu() - before) / len(requests)}


def wait_for(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{url}: the process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"{url} did not become ready in {timeout:.0f}s")


@contextmanager
def bare_app() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The baseline: a FastAPI app under the same uvicorn options that checks the signature and answers 202."""
    port = free_port()
    env = os.environ | {"DDL_TRIAGE_WEBHOOK_SECRET": SECRET}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench.bare_app:app", "--port", str(port),
                             *UVICORN_FAST], cwd=ROOT, env=env)
    try:
        wait_for(f"http://127.0.0.1:{port}/docs", 60, proc)
        yield proc, port
    finally:
        proc.terminate()
        proc.wait(10)


def rss_mib(proc: subprocess.Popen[bytes]) -> tuple[float, float]:
    """RSS of the web process and of its worker children, in MiB."""
    parent = psutil.Process(proc.pid)
    workers = sum(child.memory_info().rss for child in parent.children(recursive=True))
    return parent.memory_info().rss / 2**20, workers / 2**20


@contextmanager
def service(fake: FakeGitHubProcess, database_url: str, replicas: int
            ) -> Iterator[tuple[list[subprocess.Popen[bytes]], list[int]]]:
    """`replicas` x `ddl-triage serve --workers 1` on one database, ready."""
    env = os.environ | {
        "DDL_TRIAGE_WEBHOOK_SECRET": SECRET, "DDL_TRIAGE_GITHUB_APP_ID": str(fake.info["app_id"]),
        "DDL_TRIAGE_GITHUB_PRIVATE_KEY": fake.info["key"], "DDL_TRIAGE_GITHUB_API_URL": fake.info["base_url"],
        "DDL_TRIAGE_DATABASE_URL": database_url, "DDL_TRIAGE_WRITE_INTERVAL_S": "0", "HF_HUB_OFFLINE": "1"}
    ports = [free_port() for _ in range(replicas)]
    script = shutil.which("ddl-triage", path=str(Path(sys.executable).parent)) or "ddl-triage"
    procs = [subprocess.Popen([script, "serve", "--port", str(port), "--workers", "1"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL) for port in ports]
    try:
        for port, proc in zip(ports, procs, strict=True):
            wait_for(f"http://127.0.0.1:{port}/healthz/ready", 600, proc)
        yield procs, ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


def wait_for_comments(fake: FakeGitHubProcess, issues: int, sent: float) -> dict[str, Any]:
    """Until `issues` issues have the bot's comment (at most 15 minutes), then 2 s more for a late duplicate."""
    deadline = time.monotonic() + 900
    while fake.counts["issues"] < issues and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2.0)
    return {"all_comments_s": fake.counts["t"] - sent, "lost": issues - fake.counts["issues"],
            "doubled": fake.counts["doubled"]}


def run_setup(setup: str, workdir: Path, deliveries: int, concurrency: int, rounds: int) -> None:
    """`rounds` x (the bare app, then the service) on fresh issues; each round waits for its comments."""
    fake = FakeGitHubProcess(deliveries * rounds, workdir)
    stop_pg: list[str] = []
    try:
        if setup == "sqlite":
            url, replicas = f"sqlite:///{workdir / 'load.sqlite3'}", 1
        else:
            url, stop_pg = postgres_cluster(workdir)
            replicas = 2
        name = f"{setup} ({replicas} replica{'s' if replicas > 1 else ''})"
        requests = requests_for(fake.payloads)
        ratios = []
        pooled: dict[str, list[float]] = {"bare": [], "service": []}
        with bare_app() as (bare_proc, bare_port), service(fake, url, replicas) as (procs, ports):
            for k in range(rounds):
                batch = requests[k * deliveries:(k + 1) * deliveries]
                bare_run = timed_load([bare_proc], [bare_port], batch, concurrency)
                run = timed_load(procs, ports, batch, concurrency)
                run |= wait_for_comments(fake, (k + 1) * deliveries, time.time())
                run["rss_mib"] = [tuple(round(x) for x in rss_mib(proc)) for proc in procs]
                ratios.append(report(f"{name}, round {k + 1}", bare_run, run))
                pooled["bare"] += bare_run["latencies"]
                pooled["service"] += run["latencies"]
        bare_p99, service_p99 = p99_ms(pooled["bare"]), p99_ms(pooled["service"])
        print(f"{name}: over {rounds} rounds, p99 ratio median {statistics.median(ratios):.2f} (max "
              f"{max(ratios):.2f}); all {len(pooled['service'])} acks pooled: p99 {service_p99:.0f} ms, bare "
              f"{bare_p99:.0f} ms, ratio {service_p99 / bare_p99:.2f}", flush=True)
    finally:
        fake.stop()
        if stop_pg:
            subprocess.run(stop_pg, capture_output=True)


def postgres_cluster(workdir: Path) -> tuple[str, list[str]]:
    """A throwaway PostgreSQL cluster (Debian's initdb); its URL and the command that stops it."""
    bins = sorted(p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists())
    if not bins:
        raise SystemExit("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin")
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data = workdir / "pg"
    data.mkdir()
    if prefix:
        shutil.chown(workdir, "postgres")
        shutil.chown(data, "postgres")
    port = free_port()
    subprocess.run([*prefix, str(bins[-1] / "initdb"), "-D", str(data / "db"), "-U", "postgres", "--auth=trust"],
                   check=True, capture_output=True)
    ctl = [*prefix, str(bins[-1] / "pg_ctl"), "-D", str(data / "db")]
    subprocess.run([*ctl, "-o", f"-p {port} -k {data} -h 127.0.0.1 -c max_connections=200", "-l",
                    str(data / "log"), "-w", "start"], check=True, capture_output=True)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", [*ctl, "-m", "fast", "stop"]


def report(name: str, bare_run: dict[str, Any], run: dict[str, Any]) -> float:
    ratio = float(run["p99_ms"] / bare_run["p99_ms"])
    print(f"{name}: ack p50 {run['p50_ms']:.0f} ms, p99 {run['p99_ms']:.0f} ms | bare p50 {bare_run['p50_ms']:.0f} ms, "
          f"p99 {bare_run['p99_ms']:.0f} ms | p99 ratio {ratio:.2f} | web CPU per delivery {run['cpu_ms']:.3f} ms, "
          f"bare {bare_run['cpu_ms']:.3f} ms | load average {os.getloadavg()[0]:.1f} | every comment after "
          f"{run['all_comments_s']:.1f} s | lost {run['lost']}, doubled {run['doubled']}, dropped connections "
          f"{run['dropped']} (bare {bare_run['dropped']}) | statuses {run['statuses']} | RSS MiB (web, workers) "
          f"{run['rss_mib']}", flush=True)
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--setups", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=3, help="load rounds per setup, each on fresh issues")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="ddl-triage-load-"))
    print(f"{args.deliveries} deliveries at concurrency {args.concurrency}, {args.rounds} rounds; "
          f"{os.cpu_count()} CPUs", flush=True)
    try:
        for setup in args.setups.split(","):
            run_setup(setup, workdir, args.deliveries, args.concurrency, args.rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
