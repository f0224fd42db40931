"""Ingest writes reach exactly the graphs they touch (real Redis, real store).

Writers never tell the graph cache anything: a reader compares each graph's fingerprint with
the store's. After a 30 s window the reader's ``episodic:30`` graph grows; after a 10 min
window its ``episodic:600`` and, after consolidation, its ``semantic`` graph. Other scales
and other users keep the very graphs they had (served from the process memo), and the
write leaves every Redis key as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis

from bench.ingest_sim import HashEmbedder, SimulatedRoles
from tests.fixtures.windows import frame_window
from worldmm.deps import Deps
from worldmm.graph.cache import GraphCache, GraphMemo, cache_key
from worldmm.graph.timed import TimedGraph
from worldmm.memory.retrieval.graph_lanes import load_timed
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import CoarseWindow, dt_to_ms

# simulated construction (no model latency), no visual encoder: what ingest writes, cheaply
pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles=lambda: SimulatedRoles(0.0), embedder=HashEmbedder, encoder=None),
]

T10 = datetime(2026, 5, 4, 9, 10, tzinfo=UTC)  # a 10 min boundary
KEYS = [("episodic", s) for s in (30, 180, 600, 3600)] + [("semantic", None)]


class Reader:
    """What a query process holds: the store, the Redis cache and its graph memo."""

    def __init__(self, deps: Deps, redis_url: str) -> None:
        self.store = deps.reader
        self.cache = GraphCache.from_url(redis_url)
        self.raw = redis.Redis.from_url(redis_url)
        self.memo = GraphMemo()

    def graphs(self, user: str) -> dict[str, TimedGraph]:
        out = {}
        for memory_type, scale in KEYS:
            name = memory_type if scale is None else f"{memory_type}:{scale}"
            out[name] = load_timed(self.store, self.cache, self.memo, user, memory_type, scale)
        return out

    def stored(self, *users: str) -> dict[str, bytes | None]:
        return {
            key: self.raw.get(key)
            for user in users
            for key in (cache_key(user, m, s) for m, s in KEYS)
        }

    def close(self) -> None:
        self.cache.close()
        self.raw.close()


@pytest.fixture
def reader(deps, settings):
    r = Reader(deps, settings.redis_url)
    yield r
    r.close()


def _changes(before: dict[str, TimedGraph], after: dict[str, TimedGraph]) -> dict[str, str]:
    """Per graph: "same" (the very object the memo held) or "grown" (more units)."""
    out = {}
    for name, old in before.items():
        new = after[name]
        out[name] = "same" if new is old else ("grown" if new.units > old.units else "other")
    return out


SAME = {"episodic:30": "same", "episodic:180": "same", "episodic:600": "same",
        "episodic:3600": "same", "semantic": "same"}  # fmt: skip


async def test_base_window_grows_only_its_episodic_30_graph(deps, reader, user_id) -> None:
    other = f"{user_id}-other"
    before = {u: reader.graphs(u) for u in (user_id, other)}
    stored = reader.stored(user_id, other)
    outcome = await process_window(deps, frame_window(deps.blobs, user_id, T10, 5))
    assert outcome.status == "complete" and outcome.counts["triples"] > 0
    assert reader.stored(user_id, other) == stored  # the writer left the cache alone
    assert _changes(before[user_id], reader.graphs(user_id)) == {**SAME, "episodic:30": "grown"}
    assert _changes(before[other], reader.graphs(other)) == SAME


async def test_ten_minute_window_grows_its_scale_and_semantic(deps, reader, user_id) -> None:
    child = frame_window(
        deps.blobs, user_id, T10 + timedelta(minutes=9, seconds=30), 5
    )  # feeds the 10 min
    assert (await process_window(deps, child)).status == "complete"
    other = f"{user_id}-other"
    before = {u: reader.graphs(u) for u in (user_id, other)}
    stored = reader.stored(user_id, other)
    window = CoarseWindow(user_id, 600, dt_to_ms(T10), (child.wid,), True, "s1")
    outcome = await process_window(deps, window)
    assert outcome.status == "complete" and outcome.counts["semantic"] > 0
    assert reader.stored(user_id, other) == stored
    assert _changes(before[user_id], reader.graphs(user_id)) == {
        **SAME,
        "episodic:600": "grown",
        "semantic": "grown",
    }
    assert _changes(before[other], reader.graphs(other)) == SAME
