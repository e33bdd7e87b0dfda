"""The review page's tables on both engines (SQLite and a throwaway PostgreSQL cluster): sessions, ratings,
the kept comment HTML, the backtest's table, retention and erasure."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bot.memory.index import MemoryIndex
from bot.memory.labels import LabelModels
from bot.memory.queries import Memory
from bot.memory.store import MemoryStore
from bot.models.embedding import Embedder
from bot.service.decisions.models import Decision
from bot.service.queue.store import Store
from bot.service.retention.erasure import erase_repositories
from bot.service.retention.policy import prune
from bot.service.review import records, sessions
from bot.service.review.html_cache import comment_html
from tests.test_service_store import postgres_cluster, postgres_server, url  # noqa: F401 (fixtures)


@pytest.fixture
def db(url: str) -> Iterator[Store]:  # noqa: F811 (the imported fixture)
    opened = Store(url)
    yield opened
    opened.close()


def _decision(delivery_id: str, repo: str = "o/r", comment: str | None = "**hi**") -> Decision:
    return Decision(delivery_id=delivery_id, repo=repo, number=1, event="issues", action="opened", shadow=True,
                    posted=False, predictions={}, neighbours=[], comment=comment)


def test_sessions_are_found_by_their_id_only_until_they_expire_or_close(db: Store) -> None:
    store = db
    session_id, opened = sessions.open_session(store, "alice", operator=False, token="ghu_x", repos=["o/r"],
                                               ttl_s=60)
    found = sessions.find_session(store, session_id)
    assert found is not None and found.csrf == opened.csrf and found.may_see("o/r") and not found.may_see("o/s")
    assert sessions.find_session(store, session_id + "x") is None and sessions.find_session(store, None) is None
    sessions.recheck_session(store, session_id, [])
    assert sessions.find_session(store, session_id).repos == []  # type: ignore[union-attr]
    sessions.close_session(store, session_id)
    assert sessions.find_session(store, session_id) is None
    gone, _ = sessions.open_session(store, "op", operator=True, token=None, repos=None, ttl_s=-1)
    assert sessions.find_session(store, gone) is None


def test_ratings_html_and_backtests_are_stored_then_pruned_and_erased(db: Store, url: str) -> None:  # noqa: F811
    store = db
    first, other = _decision("d1"), _decision("d2", repo="o/s")
    for decided in (first, other):
        store.save_decision(decided)
    records.rate(store, first, "alice", True)
    records.rate(store, first, "alice", False)  # replaces her earlier rating
    records.rate(store, first, "bob", True, source=records.REACTION)
    rating = records.ratings(store, "o/r")["d1"]
    assert (rating.useful, rating.not_useful, rating.verdict) == (1, 1, None)
    assert comment_html(store, [first, other]) == {"d1": "<p><strong>hi</strong></p>\n",
                                                   "d2": "<p><strong>hi</strong></p>\n"}
    edited = first.model_copy(update={"comment": "*new*"})  # a stale rendering is rendered again
    assert comment_html(store, [edited]) == {"d1": "<p><em>new</em></p>\n"}
    assert [d.delivery_id for d in records.latest_decisions(store, "o/r", 10)] == ["d1"]
    assert records.reviewed_repos(store) == ["o/r", "o/s"] and records.count_decisions(store, "o/s") == 1
    records.save_backtest(store, "o/r", {"replayed": 60})
    assert records.latest_backtest(store, "o/r")[1] == {"replayed": 60}  # type: ignore[index]
    memory_store = MemoryStore(url)
    memory = Memory(memory_store, MemoryIndex(memory_store, 1000),
                    LabelModels(memory_store.vectors, memory_store.count))
    try:  # the repository has no memory rows here: nothing to embed, so the embedder's model is never loaded
        erase_repositories(store, memory, Embedder("unused"), ["o/r"], current_delivery="none")
    finally:
        memory.close()
    assert records.ratings(store, "o/r") == {} and records.latest_backtest(store, "o/r") is None
    prune(store, days=1, now=time.time() + 3 * 86400)  # the other repository's decision and its HTML age out
    assert records.reviewed_repos(store) == []
    with store.transaction() as run:
        assert run("SELECT COUNT(*) FROM comment_html").fetchone()[0] == 0
