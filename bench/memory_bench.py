"""Repository memory benchmark: history-sync cost per 1,000 issues against the bare embedding of the same
texts; query latency p50/p99 at 10k and 100k issues of one repository; resident memory per 100k issues.

The sync runs against the fake GitHub of the tests (a real HTTP server on 127.0.0.1, real PyGithub) with an
empty embedding cache; the bare side encodes the same normalised texts with the same, already loaded model.
Latency uses synthetic unit vectors (384 dimensions, the model's) in a real SQLite memory database.

    .venv/bin/python bench/memory_bench.py [--issues 1000] [--queries 200] [--rows 10000 100000] [--skip-sync]

`--scale N` (issue 23) instead measures what 50,000 issues per repository cost, at N issues, and extrapolates:
the history sync's requests (counted against the fake) and hours at 5,000 requests an hour less the triage
reserve; the label model's memory (traced allocations it keeps), its `suggest` time, and the time a search
takes after another worker wrote one issue (a full reload before, an append after). Every figure is printed
with the N it was measured at; the sync's is linear in the history, the others as stated beside them.

    nice .venv/bin/python bench/memory_bench.py --scale 10000 [--sync-issues 1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.core.settings import Settings
from bot.memory.index import MemoryIndex
from bot.memory.labels import MAX_HELD_OUT, LabelModel
from bot.memory.records import issue_text
from bot.memory.store import MemoryIssue, MemoryStore
from bot.memory.sync import sync_repository
from bot.models.embedding import Embedder, EmbeddingCache
from bot.service.github.issues import listed_issue

REPO = "bench-org/big"
DIM = 384


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sync_cost(issues: int, tmp: Path) -> None:
    from tests.fake_github import FakeGitHub
    from tests.memory_helpers import installation_client

    model = Settings().embedding_model
    with FakeGitHub().running() as github:
        github.add_repo(REPO, labels=["bug", "question"])
        seeded = github.seed_issues(REPO, issues, seed=11)
        texts = [issue_text(listed_issue(i)) for i in seeded]
        embedder = Embedder(model, EmbeddingCache(tmp / "sync-cache.sqlite3"))
        embedder.embed(["warm the model up"])
        store = MemoryStore(f"sqlite:///{tmp / 'sync.sqlite3'}")
        started = time.perf_counter()
        cursor = sync_repository(installation_client(github), store, embedder, REPO)
        sync_s = time.perf_counter() - started
        assert cursor.synced == issues, cursor
        bare_model = Embedder(model)._load()
        bare_model.encode(["warm the model up"])
        started = time.perf_counter()
        bare_model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True,
                          show_progress_bar=False)
        bare_s = time.perf_counter() - started
        requests = len(github.requests)
        # The same sync again into a fresh database with every text already embedded: the sync's own cost
        # (listing, timelines, records, database) without the model.
        again = MemoryStore(f"sqlite:///{tmp / 'sync-again.sqlite3'}")
        started = time.perf_counter()
        sync_repository(installation_client(github), again, embedder, REPO)
        overhead_s = time.perf_counter() - started
    per_k = 1000 / issues
    print(f"sync of {issues} issues: {sync_s:.1f} s ({sync_s * per_k:.1f} s per 1,000; {requests} API requests) "
          f"| bare embedding of the same texts: {bare_s:.1f} s ({bare_s * per_k:.1f} s per 1,000) "
          f"| ratio {sync_s / bare_s:.2f} (target <= 1.3) | the sync without embedding (all cached): "
          f"{overhead_s:.1f} s, i.e. (bare + that) / bare = {(bare_s + overhead_s) / bare_s:.2f}")


def latency(rows: int, queries: int, tmp: Path) -> None:
    rng = np.random.default_rng(rows)
    store = MemoryStore(f"sqlite:///{tmp / f'latency-{rows}.sqlite3'}")
    vectors = rng.normal(size=(rows, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for start in range(0, rows, 10_000):
        store.upsert([(MemoryIssue(repo=REPO, number=n + 1, title=f"issue {n}", created_at=float(n),
                                   text_hash=str(n), labels=["bug"]), vectors[n])
                      for n in range(start, min(rows, start + 10_000))])
    index = MemoryIndex(store, max_rows=10 * rows)
    del vectors
    before = rss_mib()
    started = time.perf_counter()
    index.search(REPO, rng.normal(size=DIM).astype(np.float32), k=5)  # the lazy load
    load_s = time.perf_counter() - started
    held = rss_mib() - before
    arrays = sum(a.nbytes for e in index._loaded.values() for a in (e.numbers, e.created, e.vectors)) / 2**20
    times = []
    for q in rng.normal(size=(queries, DIM)).astype(np.float32):
        q /= np.linalg.norm(q)
        started = time.perf_counter()
        index.search(REPO, q, k=5, exclude=1)
        times.append((time.perf_counter() - started) * 1000)
    p50, p99 = np.percentile(times, [50, 99])
    print(f"{rows:>7} issues in one repository: query p50 {p50:.1f} ms, p99 {p99:.1f} ms over {queries} queries "
          f"(incl. the version check); first load {load_s:.1f} s; index arrays {arrays:.0f} MiB "
          f"({arrays * 100_000 / rows:.0f} MiB per 100k), RSS growth at load {held:.0f} MiB")
    save_then_search(index, rows, rng)
    started = time.perf_counter()
    LabelModel.fit(*store.vectors(REPO))
    print(f"{rows:>7} issues: label model fit (outside triage, leave-one-out over at most "
          f"{MAX_HELD_OUT} held-out issues) {time.perf_counter() - started:.1f} s")
    store.close()


def save_then_search(index: MemoryIndex, rows: int, rng: np.random.Generator, rounds: int = 20) -> None:
    """What a triage job does to the memory: save its issue, then search. Through the index the issue is
    appended to the loaded matrix; a bare store write (as before issue 15) makes the search reload it all."""
    def one(number: int, write: Callable[[list[tuple[MemoryIssue, np.ndarray]]], object]) -> float:
        vector = rng.normal(size=DIM).astype(np.float32)
        vector /= np.linalg.norm(vector)
        started = time.perf_counter()
        write([(MemoryIssue(repo=REPO, number=number, title="new", created_at=float(number),
                            text_hash=str(number)), vector)])
        index.search(REPO, vector, k=5, exclude=number)
        return (time.perf_counter() - started) * 1000

    appended = [one(rows + 1 + i, index.save) for i in range(rounds)]
    reloaded = [one(rows + 1 + rounds + i, index.store.upsert) for i in range(max(3, rounds // 5))]
    print(f"{rows:>7} issues: save + search p50 {np.median(appended):.1f} ms, max {max(appended):.1f} ms "
          f"({rounds} saves appended to the index) | with a reload after each save (before): "
          f"p50 {np.median(reloaded):.0f} ms")


HOURLY, RESERVE, TARGET = 5000, 100, 50_000


def sync_requests(issues: int, tmp: Path) -> None:
    """Requests a history sync makes per issue (the listing pages and a timeline per closed issue), counted."""
    from tests.fake_github import FakeGitHub
    from tests.memory_helpers import installation_client

    with FakeGitHub().running() as github:
        github.add_repo(REPO, labels=["bug", "question"])
        seeded = github.seed_issues(REPO, issues, seed=11)
        embedder = Embedder(Settings().embedding_model, EmbeddingCache(tmp / "requests-cache.sqlite3"))
        store = MemoryStore(f"sqlite:///{tmp / 'requests.sqlite3'}")
        sync_repository(installation_client(github), store, embedder, REPO)
        requests = len([r for r in github.requests if r.path.startswith("/repos/")])
    closed = sum(1 for i in seeded if i["state"] == "closed" and not i.get("pull_request")) / issues
    total = requests * TARGET / issues
    print(f"sync: {requests} requests for {issues} issues ({closed:.0%} closed issues, a timeline each) -> "
          f"{total:,.0f} requests for {TARGET:,} issues, {total / (HOURLY - RESERVE):.1f} h at {HOURLY:,} "
          f"requests an hour with {RESERVE} kept for triage (linear in the issues)")


def scale(rows: int, tmp: Path, queries: int = 50) -> None:
    """The label model's memory and suggest time, and the search after another worker's write, at `rows`."""
    import gc
    import tracemalloc

    rng = np.random.default_rng(7)
    store = MemoryStore(f"sqlite:///{tmp / f'scale-{rows}.sqlite3'}")
    centres = rng.normal(size=(20, DIM)).astype(np.float32)
    for start in range(0, rows, 5000):
        batch = []
        for n in range(start, min(rows, start + 5000)):
            area = int(rng.integers(20))
            v = centres[area] + 0.6 * rng.normal(size=DIM).astype(np.float32)
            batch.append((MemoryIssue(repo=REPO, number=n + 1, title=f"issue {n}", created_at=float(n),
                                      text_hash=str(n), labels=[f"area-{area}", "bug" if n % 3 else "question"]),
                          v / np.linalg.norm(v)))
        store.upsert(batch)
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    model = LabelModel.fit(*store.vectors(REPO))
    fit_s = time.perf_counter() - started
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    times = []
    for q in rng.normal(size=(queries, DIM)).astype(np.float32):
        started = time.perf_counter()
        model.suggest(q / np.linalg.norm(q))
        times.append((time.perf_counter() - started) * 1000)
    index = MemoryIndex(store, max_rows=10 * rows)
    index.search(REPO, centres[0] / np.linalg.norm(centres[0]))
    arrays = sum(a.nbytes for e in index._loaded.values() for a in (e.numbers, e.created, e.vectors)) / 2**20
    other = MemoryStore(store.url)  # another worker's write (a history sync page, a live update)
    after_write = []
    for n in range(5):
        v = centres[n] / np.linalg.norm(centres[n])
        other.upsert([(MemoryIssue(repo=REPO, number=rows + 1 + n, title="new", created_at=float(rows + n),
                                   text_hash=f"new-{n}"), v)])
        started = time.perf_counter()
        index.search(REPO, v)
        after_write.append((time.perf_counter() - started) * 1000)
    other.close()
    per = TARGET / rows
    print(f"{rows:,} issues ({len(model.thresholds)} labels kept): label model keeps {kept:.0f} MiB "
          f"(~{kept * per:.0f} MiB at {TARGET:,}, linear), fit {fit_s:.1f} s | suggest p50 "
          f"{np.median(times):.1f} ms, max {max(times):.1f} ms | index arrays {arrays:.0f} MiB (~{arrays * per:.0f} "
          f"MiB at {TARGET:,}) | search after another worker's write of one issue: p50 "
          f"{np.median(after_write):.1f} ms, max {max(after_write):.1f} ms")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skip-sync", action="store_true")
    parser.add_argument("--scale", type=int, default=0, help="measure the 50,000-issue costs at this many issues")
    parser.add_argument("--sync-issues", type=int, default=1000, help="issues synced to count requests (--scale)")
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000],
                        help="repository sizes for the query latency (issues)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.scale:
            sync_requests(args.sync_issues, Path(tmp))
            scale(args.scale, Path(tmp))
            return
        if not args.skip_sync:
            sync_cost(args.issues, Path(tmp))
        for rows in args.rows:
            latency(rows, args.queries, Path(tmp))


if __name__ == "__main__":
    main()
