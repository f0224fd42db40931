"""Ingest writes invalidate exactly the graph-cache keys they touch (real Redis, real store).

A 30 s window's write tombstones the writer's ``episodic:30`` key only; a 10 min window's
tombstones its ``episodic:600`` key and, after consolidation, its ``semantic`` key. Other
scales and other users' keys keep their graphs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import igraph as ig
import pytest

from bench.ingest_sim import HashEmbedder, SimulatedRoles, small_jpeg
from worldmm.blobs import LocalBlobStore, frame_key
from worldmm.deps import Deps
from worldmm.graph.cache import TOMBSTONE, GraphCache
from worldmm.memory.construct import process_window
from worldmm.memory.construct_inputs import CaptureRef
from worldmm.memory.windows import BaseWindow, CoarseWindow, Item, dt_to_ms

pytestmark = pytest.mark.integration

T10 = datetime(2026, 5, 4, 9, 10, tzinfo=UTC)  # a 10 min boundary
KEYS = [("episodic", s) for s in (30, 180, 600, 3600)] + [("semantic", None)]


@pytest.fixture
def deps(settings, tmp_path):
    from worldmm.store.db import Database

    d = Deps(
        settings=settings,
        db=Database(settings.database_url, max_size=2),
        roles=SimulatedRoles(0.0),
        embedder=HashEmbedder(settings.text_embed_dim),
        transcriber=None,
        encoder=None,
        blobs=LocalBlobStore(tmp_path / "blobs"),
        cache=GraphCache.from_url(settings.redis_url),
    )
    yield d
    d.close()


def _fill(cache: GraphCache, *users: str) -> None:
    """A small graph under every key of each user (the key must be absent or tombstoned)."""
    for user in users:
        for memory_type, scale in KEYS:
            token = cache.get(user, memory_type, scale).token
            assert cache.put(user, memory_type, scale, ig.Graph(n=2, edges=[(0, 1)]), token)


def _state(cache: GraphCache, user: str) -> dict[str, str]:
    out = {}
    for memory_type, scale in KEYS:
        read = cache.get(user, memory_type, scale)
        name = memory_type if scale is None else f"{memory_type}:{scale}"
        out[name] = (
            "graph"
            if read.graph is not None
            else ("tombstone" if read.token.startswith(TOMBSTONE) else "absent")
        )
    return out


def _base(deps: Deps, user: str, start: datetime) -> BaseWindow:
    items = []
    for k in range(0, 30, 5):
        ts = start + timedelta(seconds=k)
        key = frame_key(user, "s1", ts, k)
        deps.blobs.put(key, small_jpeg(k))
        items.append(Item("frames", key, "s1", dt_to_ms(ts), dt_to_ms(ts), CaptureRef(key, seq=k)))
    return BaseWindow(user, dt_to_ms(start), tuple(items), False, "s1")


ALL_GRAPHS = {"episodic:30": "graph", "episodic:180": "graph", "episodic:600": "graph",
              "episodic:3600": "graph", "semantic": "graph"}  # fmt: skip


async def test_base_window_invalidates_only_its_episodic_30_key(deps, user_id) -> None:
    other = f"{user_id}-other"
    _fill(deps.cache, user_id, other)
    outcome = await process_window(deps, _base(deps, user_id, T10))
    assert outcome.status == "complete" and outcome.counts["triples"] > 0
    assert _state(deps.cache, user_id) == {**ALL_GRAPHS, "episodic:30": "tombstone"}
    assert _state(deps.cache, other) == ALL_GRAPHS


async def test_ten_minute_window_invalidates_its_scale_and_semantic(deps, user_id) -> None:
    child = _base(deps, user_id, T10 + timedelta(minutes=9, seconds=30))  # feeds the 10 min
    assert (await process_window(deps, child)).status == "complete"
    other = f"{user_id}-other"
    _fill(deps.cache, user_id, other)
    window = CoarseWindow(user_id, 600, dt_to_ms(T10), (child.wid,), True, "s1")
    outcome = await process_window(deps, window)
    assert outcome.status == "complete" and outcome.counts["semantic"] > 0
    assert _state(deps.cache, user_id) == {
        **ALL_GRAPHS,
        "episodic:600": "tombstone",
        "semantic": "tombstone",
    }
    assert _state(deps.cache, other) == ALL_GRAPHS
