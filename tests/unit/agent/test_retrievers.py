"""Episodic, semantic and visual retrievers over an in-memory reader (no services)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from tests.unit.agent.fakes import Clip, FakeEncoder, FakeReader, HashEmbedder, ScriptedRoles
from worldmm.graph.cache import CacheRead, NullCache
from worldmm.graph.types import GraphTriple
from worldmm.memory.retrieval import (
    RetrievalDeps,
    parse_time_range,
    search,
    search_episodic,
    search_semantic,
    search_visual,
)
from worldmm.memory.retrieval.deps import FrameRef
from worldmm.memory.retrieval.episodic import EpisodicOptions, run_lanes
from worldmm.memory.retrieval.visual import MAX_RANGE_FRAMES, thin_frames
from worldmm.models import SegmentRecord
from worldmm.providers.errors import ModelCallError
from worldmm.settings import Settings

USER = "alice"
T0 = datetime(2025, 5, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class MemoryCache:
    """Dict-backed stand-in with GraphCache's get/put contract."""

    def __init__(self) -> None:
        self.store: dict[tuple, object] = {}
        self.puts = 0

    def get(self, user_id, memory_type, scale=None):
        graph = self.store.get((user_id, memory_type, scale))
        return CacheRead(graph, b"" if graph is None else b"graph")

    def put(self, user_id, memory_type, scale, graph, token):
        self.puts += 1
        self.store[(user_id, memory_type, scale)] = graph
        return True


def seg(i: int, scale: int, start: float, text: str) -> SegmentRecord:
    return SegmentRecord(
        id=i,
        user_id=USER,
        session_id="s",
        scale_seconds=scale,
        window_start=at(start),
        window_end=at(start + scale),
        caption=text,
        processing_status="complete",
    )


def tri(tid, s, p, o, segment=None, scale=None, literal=False, **kw) -> GraphTriple:
    return GraphTriple(
        triple_id=tid,
        subject=s,
        predicate=p,
        object=o,
        object_is_literal=literal,
        segment_id=segment,
        scale=scale,
        **kw,
    )


@pytest.fixture
def world():
    emb = HashEmbedder()
    reader = FakeReader(emb)
    segments = [
        seg(1, 30, 0, "Kate hands me a red cup in the kitchen."),
        seg(2, 30, 30, "Alex reads a book on the sofa."),
        seg(3, 30, 60, "I wash the red cup at the sink."),
        seg(5, 30, 3600, "Kate drives to work in a blue car."),
        seg(4, 180, 0, "A morning in the kitchen with Kate and Alex."),
    ]
    for s in segments:
        reader.add_segment(USER, s)
    episodic = [
        tri(1, "Kate", "hands", "red cup", 1, 30),
        tri(2, "I", "stand in", "kitchen", 1, 30),
        tri(3, "Alex", "reads", "book", 2, 30),
        tri(4, "Alex", "sits on", "sofa", 2, 30),
        tri(5, "I", "wash", "red cup", 3, 30),
        tri(6, "I", "stand at", "sink", 3, 30),
        tri(7, "Kate", "drives to", "work", 5, 30),
        tri(8, "Kate", "drives", "blue car", 5, 30),
        tri(9, "Kate", "is in", "kitchen", 4, 180),
        tri(10, "Alex", "is in", "kitchen", 4, 180),
    ]
    for t in episodic:
        reader.add_triple(USER, "episodic", t)
    removed = at(7200)
    semantic = [
        tri(20, "I", "likes", "coffee", valid_from=at(0)),
        tri(21, "I", "drinks coffee at", "8 am", literal=True, valid_from=at(0)),
        tri(22, "Kate", "is friend of", "I", valid_from=at(0)),
        tri(23, "Alex", "plays", "tennis", valid_from=at(0)),
        tri(24, "tennis", "is played at", "Club", valid_from=at(0)),
        tri(25, "I", "likes", "tea", valid_from=at(0), invalidated_at=removed),
    ]
    for t in semantic:
        reader.add_triple(USER, "semantic", t)
    reader.clips[USER] = [
        Clip(1, at(0), at(30), emb.vector("red cup kitchen")),
        Clip(2, at(30), at(60), emb.vector("book sofa")),
        Clip(5, at(3600), at(3630), emb.vector("blue car road")),
    ]
    reader.frame_rows[USER] = [FrameRef(key=f"f/{i:04d}.jpg", ts=at(i * 0.5)) for i in range(240)]
    reader.frame_rows[USER] += [FrameRef(key=f"g/{i:04d}.jpg", ts=at(3600 + i)) for i in range(30)]
    roles = ScriptedRoles()
    deps = RetrievalDeps(
        db=None,
        roles=roles,
        embedder=emb,
        encoder=FakeEncoder(emb),
        cache=NullCache(),
        settings=Settings(database_url=None, redis_url=None),
        store=reader,
    )
    return deps, reader, roles


def run(coro):
    return asyncio.run(coro)


# --- episodic ---------------------------------------------------------------------------------
def test_episodic_finds_the_segment_of_the_named_entity_and_fact(world):
    deps, reader, roles = world
    result = run(search_episodic(deps, USER, "Which red cup did Kate hand me?"))
    assert result.memory_type == "episodic"
    assert result.hits[0].segment_id == 1
    assert result.hits[0].text.startswith("Kate hands me")
    assert len(result.hits) <= deps.settings.rerank_keep
    assert roles.rerank_calls == []  # the rerank model is off by default
    # without PostgreSQL only the graph lane runs; its rank and score are kept on each hit
    assert all(set(h.lanes) == {"graph"} for h in result.hits)
    assert result.hits[0].lanes["graph"].rank == 1
    # the lane ranks both scales' graphs (the 3 min summary is among the hits)
    assert {h.scale for h in result.hits} == {30, 180}


def with_rerank(deps):
    deps.settings = deps.settings.model_copy(update={"episodic_llm_rerank": True})
    return deps


def test_episodic_uses_the_rerankers_order_and_ignores_invented_ids(world):
    deps, reader, roles = world
    roles.rerank_ids = ["99", "4", "1", "4"]
    result = run(search_episodic(with_rerank(deps), USER, "Kate in the kitchen"))
    assert [h.segment_id for h in result.hits] == [4, 1]
    ((query, candidates, keep),) = roles.rerank_calls
    assert keep == 3 and query == "Kate in the kitchen"
    assert len(candidates) > keep  # the model chooses among more than it keeps


def test_episodic_rerank_failure_falls_back_to_the_fused_order(world, caplog):
    deps, reader, roles = world
    plain = run(search_episodic(deps, USER, "Which red cup did Kate hand me?"))
    roles.rerank_error = ModelCallError("timeout", role="cross_scale_rerank")
    with caplog.at_level(logging.WARNING):
        result = run(search_episodic(with_rerank(deps), USER, "Which red cup did Kate hand me?"))
    assert "retrieval.rerank_failed" in caplog.text
    assert [h.segment_id for h in result.hits] == [h.segment_id for h in plain.hits]
    assert result.hits[0].segment_id == 1
    assert len(result.hits) == 3


def test_episodic_without_ner_still_seeds_from_facts(world):
    deps, reader, roles = world
    roles.ner_error = ModelCallError("down", role="ner")
    result = run(search_episodic(deps, USER, "who reads a book on the sofa"))
    assert result.hits[0].segment_id == 2


def test_episodic_as_of_hides_later_segments_and_reaches_every_read(world):
    deps, reader, roles = world
    now = run(search_episodic(deps, USER, "Kate drives to work"))
    assert 5 in [h.segment_id for h in now.hits]
    reader.calls.clear()
    cutoff = at(600)
    past = run(search_episodic(deps, USER, "Kate drives to work", as_of=cutoff))
    assert 5 not in [h.segment_id for h in past.hits]
    assert all(h.end <= cutoff for h in past.hits)
    timed = [c for c in reader.calls if c[0] == "top_triples"]
    assert timed and all(as_of == cutoff for _, _, as_of in timed)
    assert all(user == USER for _, user, _ in reader.calls)


def test_episodic_other_user_sees_nothing(world):
    deps, reader, roles = world
    result = run(search_episodic(deps, "bob", "Which red cup did Kate hand me?"))
    assert result.hits == []
    assert result.as_text().startswith("(no results)")


def test_graph_kept_once_serves_now_and_as_of(world):
    deps, reader, roles = world
    deps.cache = MemoryCache()
    run(search_episodic(deps, USER, "red cup"))
    reads_after_first = reader.graph_reads
    assert reads_after_first == 4  # one graph per scale
    run(search_episodic(deps, USER, "red cup"))
    assert reader.graph_reads == reads_after_first  # all four from the process memo
    past = run(search_episodic(deps, USER, "Kate drives to work", as_of=at(100)))
    assert reader.graph_reads == reads_after_first  # as_of masks the same graphs
    assert deps.cache.puts == 4  # each graph stored once, when built
    assert all(h.end <= at(100) for h in past.hits)


def test_stale_cached_graph_is_rebuilt_even_without_invalidation(world):
    deps, reader, roles = world
    deps.cache = MemoryCache()
    first = run(search_episodic(deps, USER, "I wash the red cup at the sink"))
    reads = reader.graph_reads
    # a new 30 s segment is written and nobody invalidates the cache
    reader.add_segment(USER, seg(6, 30, 90, "I dry the red cup with a towel."))
    reader.add_triple(USER, "episodic", tri(11, "I", "dry", "red cup", 6, 30))
    opts = EpisodicOptions.from_settings(deps.settings)
    again = run(run_lanes(deps, USER, "I dry the red cup with a towel", None, opts))
    assert reader.graph_reads == reads + 1  # only the 30 s graph changed and was rebuilt
    assert 6 in [c.segment_id for c in again.lanes["graph"]]
    assert 6 not in [h.segment_id for h in first.hits]


# --- semantic ---------------------------------------------------------------------------------
def test_semantic_returns_facts_around_the_matching_ones(world):
    deps, reader, roles = world
    result = run(search_semantic(deps, USER, "what does I like, coffee?"))
    facts = [(h.subject, h.predicate, h.object) for h in result.hits]
    assert facts[0][2] == "coffee" or facts[1][2] == "coffee"
    assert ("I", "likes", "coffee") in facts
    assert ("I", "likes", "tea") not in facts  # consolidated away
    assert len(result.hits) <= deps.settings.semantic_top_k
    assert all(h.valid_from == at(0) for h in result.hits)
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_semantic_edge_score_ranks_seed_neighbourhood_first(world):
    deps, reader, roles = world
    deps.settings = deps.settings.model_copy(update={"semantic_top_k": 2})
    result = run(search_semantic(deps, USER, "Alex plays tennis"))
    assert {h.triple_id for h in result.hits} == {23, 24}


def test_semantic_as_of_sees_a_fact_removed_later(world):
    deps, reader, roles = world
    past = run(search_semantic(deps, USER, "I likes tea", as_of=at(3600)))
    hit = next(h for h in past.hits if h.object == "tea")
    assert hit.invalidated_at is None  # not yet removed at that time
    now = run(search_semantic(deps, USER, "I likes tea"))
    assert "tea" not in [h.object for h in now.hits]
    before_anything = run(search_semantic(deps, USER, "I likes tea", as_of=at(-1)))
    assert before_anything.hits == []


def test_semantic_drops_a_fact_removed_after_its_graph_was_cached(world):
    deps, reader, roles = world
    deps.cache = MemoryCache()
    reader.fingerprint_override = "frozen"  # a change the fingerprint cannot see
    run(search_semantic(deps, USER, "I likes coffee"))  # caches the graph
    # consolidation removes the coffee fact, the cached graph still has it
    reader.triples[USER] = [
        (m, t.model_copy(update={"invalidated_at": at(100)}) if t.triple_id == 20 else t)
        for m, t in reader.triples[USER]
    ]
    result = run(search_semantic(deps, USER, "I likes coffee"))
    assert 20 not in [h.triple_id for h in result.hits]


# --- visual ----------------------------------------------------------------------------------
def test_visual_feature_mode_returns_frames_of_best_clips(world):
    deps, reader, roles = world
    result = run(search_visual(deps, USER, "red cup kitchen"))
    assert deps.encoder.texts == ["red cup kitchen"]
    assert result.hits[0].segment_id == 1
    first_clip = [h for h in result.hits if h.segment_id == 1]
    assert 1 <= len(first_clip) <= 4
    assert all(at(0) <= h.ts < at(30) for h in first_clip)
    assert {h.segment_id for h in result.hits} <= {1, 2, 5}


def test_visual_feature_mode_respects_as_of(world):
    deps, reader, roles = world
    result = run(search_visual(deps, USER, "blue car road", as_of=at(600)))
    assert 5 not in {h.segment_id for h in result.hits}
    assert ("search_visual", USER, at(600)) in reader.calls


def test_visual_encoder_unavailable_is_an_empty_result_not_an_error(world):
    deps, reader, roles = world
    deps.encoder.available = False
    result = run(search_visual(deps, USER, "red cup"))
    assert result.hits == [] and "unavailable" in result.note
    assert result.as_text().startswith("(no results)")
    deps.encoder = None
    assert "not configured" in run(search_visual(deps, USER, "red cup")).note


def test_visual_time_range_mode_needs_no_encoder(world):
    deps, reader, roles = world
    deps.encoder = None
    result = run(search_visual(deps, USER, "frames 2025-05-01T10:00:00Z to 2025-05-01T10:00:10Z"))
    assert len(result.hits) == 10  # frames every 0.5 s, thinned to one per second
    assert [h.ts for h in result.hits] == [at(i) for i in range(10)]
    long = run(search_visual(deps, USER, "2025-05-01T10:00:00Z - 2025-05-01T10:02:00Z"))
    assert len(long.hits) == MAX_RANGE_FRAMES
    capped = run(
        search_visual(deps, USER, "2025-05-01T10:00:00Z to 2025-05-01T11:00:00Z", as_of=at(5))
    )
    assert capped.hits and all(h.ts < at(5) for h in capped.hits)


def test_parse_time_range_forms():
    assert parse_time_range("the red door") is None
    start, end = parse_time_range("around 2025-05-01 10:00:20")
    assert (start, end) == (at(5), at(35))
    start, end = parse_time_range("2025-05-01T12:00:00+02:00 until 2025-05-01T09:59:00Z")
    assert (start, end) == (at(-60), at(0))
    assert parse_time_range("2025-13-45T99:00 to x") is None


def test_thin_frames_bins():
    frames = [FrameRef(key=str(i), ts=at(i / 4)) for i in range(40)]  # 10 s at 4 fps
    assert [f.key for f in thin_frames(frames, at(0), at(10), 100)] == [
        str(i) for i in range(0, 40, 4)
    ]
    assert len(thin_frames(frames, at(0), at(10), 5)) == 5
    assert thin_frames([], at(0), at(1), 5) == []


# --- dispatch --------------------------------------------------------------------------------
def test_search_dispatches_by_memory_type(world):
    deps, reader, roles = world
    assert run(search(deps, "semantic", USER, "coffee")).memory_type == "semantic"
    with pytest.raises(ValueError, match="unknown memory type"):
        run(search(deps, "smell", USER, "coffee"))


def test_deps_need_a_database_or_a_reader():
    with pytest.raises(ValueError, match="Database"):
        RetrievalDeps(
            db=None,
            roles=ScriptedRoles(),
            embedder=HashEmbedder(),
            encoder=None,
            cache=NullCache(),
            settings=Settings(),
        )
