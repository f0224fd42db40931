"""Episodic, semantic and visual retrievers over a small memory in PostgreSQL; the reader
records every call, so a test sees which user and ``as_of`` each read got and how often the
graphs were read."""

from __future__ import annotations

import asyncio
import logging
from typing import NamedTuple

import pytest

from tests.fixtures.fake_models import ScriptedRoles
from tests.fixtures.recording_reader import RecordingReader
from tests.fixtures.retrieval_memory import BOOK, CUP, MORNING, Memory, at
from worldmm.deps import Deps
from worldmm.graph.cache import CacheRead
from worldmm.memory.retrieval import (
    search,
    search_episodic,
    search_semantic,
    search_visual,
)
from worldmm.memory.retrieval.episodic import EpisodicOptions, run_lanes
from worldmm.memory.retrieval.visual import MAX_RANGE_FRAMES
from worldmm.providers.errors import ModelCallError

# scripted roles and hash embeddings; the graph lane alone, no drill-down: what these tests
# measure is the lane's reads
pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(episodic_lane_weights="graph:1", episodic_drill_parents=0),
]


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


@pytest.fixture
def memory(db, user_id, hash_embedder, visual_hash_embedder) -> Memory:
    m = Memory(db, user_id, hash_embedder, visual_hash_embedder)
    m.segment(*CUP)
    m.segment(*BOOK)
    m.segment("wash", 30, 60, "I wash the red cup at the sink.",
              [("I", "wash", "red cup", False), ("I", "stand at", "sink", False)])  # fmt: skip
    # Its second fact shares no word with the questions below: PostgreSQL returns equally
    # near facts in no set order, and which of them seed the graph must not decide a test.
    m.segment("drive", 30, 3600, "Kate drives to work in a blue car.",
              [("Kate", "drives to", "work", False), ("I", "see", "blue car", False)],
              clip_text="blue car road")  # fmt: skip
    m.segment(*MORNING)
    m.fact("coffee", "I", "likes", "coffee", at(0))
    m.fact("coffee_at", "I", "drinks coffee at", "8 am", at(0), literal=True)
    m.fact("friend", "Kate", "is friend of", "I", at(0))
    m.fact("tennis", "Alex", "plays", "tennis", at(0))
    m.fact("club", "tennis", "is played at", "Club", at(0))
    m.fact("tea", "I", "likes", "tea", at(0))
    m.remove("tea", at(7200))
    m.frames(0, 240)  # every 0.5 s for two minutes
    m.frames(3600, 30, step_s=1.0)
    return m


class World(NamedTuple):
    deps: Deps
    reader: RecordingReader
    roles: ScriptedRoles
    memory: Memory
    user: str


@pytest.fixture
def world(memory, deps) -> World:
    reader = RecordingReader(deps.reader)
    deps.reader = reader  # type: ignore[misc]  # the same reads, recorded
    return World(deps, reader, deps.roles, memory, memory.user)


def run(coro):
    return asyncio.run(coro)


# --- episodic ---------------------------------------------------------------------------------
def test_episodic_finds_the_segment_of_the_named_entity_and_fact(world):
    deps, reader, roles, memory, user = world
    result = run(search_episodic(deps, user, "Which red cup did Kate hand me?"))
    assert result.memory_type == "episodic"
    assert result.hits[0].segment_id == memory.seg_ids["cup"]
    assert result.hits[0].text.startswith("Kate hands me")
    assert len(result.hits) <= deps.settings.rerank_keep
    assert roles.rerank_calls == []  # the rerank model is off by default
    # only the graph lane is weighed; its rank and score are kept on each hit
    assert all(set(h.lanes) == {"graph"} for h in result.hits)
    assert result.hits[0].lanes["graph"].rank == 1
    # the lane ranks both scales' graphs (the 3 min summary is among the hits)
    assert {h.scale for h in result.hits} == {30, 180}


def with_rerank(deps):
    deps.settings = deps.settings.model_copy(update={"episodic_llm_rerank": True})
    return deps


def test_episodic_uses_the_rerankers_order_and_ignores_invented_ids(world):
    deps, reader, roles, memory, user = world
    morning, cup = str(memory.seg_ids["morning"]), str(memory.seg_ids["cup"])
    roles.rerank_ids = ["99999999", morning, cup, morning]
    result = run(search_episodic(with_rerank(deps), user, "Kate in the kitchen"))
    assert [h.segment_id for h in result.hits] == [memory.seg_ids["morning"], memory.seg_ids["cup"]]
    ((query, candidates, keep),) = roles.rerank_calls
    assert keep == 3 and query == "Kate in the kitchen"
    assert len(candidates) > keep  # the model chooses among more than it keeps


def test_episodic_rerank_failure_falls_back_to_the_fused_order(world, caplog):
    deps, reader, roles, memory, user = world
    plain = run(search_episodic(deps, user, "Which red cup did Kate hand me?"))
    roles.rerank_error = ModelCallError("timeout", role="cross_scale_rerank")
    with caplog.at_level(logging.WARNING):
        result = run(search_episodic(with_rerank(deps), user, "Which red cup did Kate hand me?"))
    assert "retrieval.rerank_failed" in caplog.text
    assert [h.segment_id for h in result.hits] == [h.segment_id for h in plain.hits]
    assert result.hits[0].segment_id == memory.seg_ids["cup"]
    assert len(result.hits) == 3


def test_episodic_without_ner_still_seeds_from_facts(world):
    deps, reader, roles, memory, user = world
    roles.ner_error = ModelCallError("down", role="ner")
    result = run(search_episodic(deps, user, "who reads a book on the sofa"))
    assert result.hits[0].segment_id == memory.seg_ids["book"]


def test_episodic_as_of_hides_later_segments_and_reaches_every_read(world):
    deps, reader, roles, memory, user = world
    now = run(search_episodic(deps, user, "Kate drives to work"))
    assert memory.seg_ids["drive"] in [h.segment_id for h in now.hits]
    reader.calls.clear()
    cutoff = at(600)
    past = run(search_episodic(deps, user, "Kate drives to work", as_of=cutoff))
    assert memory.seg_ids["drive"] not in [h.segment_id for h in past.hits]
    assert all(h.end <= cutoff for h in past.hits)
    timed = [c for c in reader.calls if c[0] == "nearest_window_facts"]
    assert timed and all(as_of == cutoff for _, _, as_of in timed)
    assert all(who == user for _, who, _ in reader.calls)


def test_fact_seeds_are_the_nearest_facts_of_the_windows_nearest_the_question(world, monkeypatch):
    """Episodic facts have no vector index: the graph lane scores, exactly, the facts of the
    windows whose text is nearest the question (HippoRAG 2's passages first)."""
    from worldmm.memory.retrieval import graph_lanes

    deps, reader, roles, memory, user = world
    qvec = memory.text.vector("Alex reads a book on the sofa")
    facts = graph_lanes.fact_seeds(deps, user, qvec, 30, None)
    best, score = facts[0]
    assert (best.segment_id, best.subject, best.predicate, best.object) == (
        memory.seg_ids["book"],
        "Alex",
        "reads",
        "book",
    )
    assert score == pytest.approx(float(qvec @ memory.text.vector("Alex reads book")), abs=1e-6)
    assert [s for _, s in facts] == sorted((s for _, s in facts), reverse=True)
    assert len(facts) == graph_lanes.FACT_SEEDS  # the four windows hold eight facts
    # a fact outside the candidate windows seeds nothing, however near it is
    monkeypatch.setattr(graph_lanes, "FACT_WINDOWS", 1)
    only = graph_lanes.fact_seeds(deps, user, qvec, 30, None)
    assert {t.segment_id for t, _ in only} == {memory.seg_ids["book"]}
    assert len(only) == 2
    # the windows and their facts are those that existed at as_of, and of the asked scale
    drive = memory.text.vector("Kate drives to work in a blue car")
    assert (
        graph_lanes.fact_seeds(deps, user, drive, 30, at(600))[0][0].segment_id
        != (memory.seg_ids["drive"])
    )
    assert (
        graph_lanes.fact_seeds(deps, user, drive, 30, None)[0][0].segment_id
        == (memory.seg_ids["drive"])
    )
    coarse = graph_lanes.fact_seeds(deps, user, qvec, 180, None)
    assert {t.segment_id for t, _ in coarse} == {memory.seg_ids["morning"]}


def test_episodic_other_user_sees_nothing(world):
    deps, reader, roles, memory, user = world
    result = run(search_episodic(deps, "someone-else", "Which red cup did Kate hand me?"))
    assert result.hits == []
    assert result.as_text().startswith("(no results)")


def test_graph_kept_once_serves_now_and_as_of(world):
    deps, reader, roles, memory, user = world
    deps.cache = MemoryCache()
    run(search_episodic(deps, user, "red cup"))
    reads_after_first = reader.graph_reads
    assert reads_after_first == 4  # one graph per scale
    run(search_episodic(deps, user, "red cup"))
    assert reader.graph_reads == reads_after_first  # all four from the process memo
    past = run(search_episodic(deps, user, "Kate drives to work", as_of=at(100)))
    assert reader.graph_reads == reads_after_first  # as_of masks the same graphs
    assert deps.cache.puts == 4  # each graph stored once, when built
    assert all(h.end <= at(100) for h in past.hits)


def test_stale_cached_graph_is_rebuilt_even_without_invalidation(world):
    deps, reader, roles, memory, user = world
    deps.cache = MemoryCache()
    first = run(search_episodic(deps, user, "I wash the red cup at the sink"))
    reads = reader.graph_reads
    # a new 30 s segment is written and nobody invalidates the cache
    memory.segment("dry", 30, 90, "I dry the red cup with a towel.",
                   [("I", "dry", "red cup", False)])  # fmt: skip
    opts = EpisodicOptions.from_settings(deps.settings)
    again = run(run_lanes(deps, user, "I dry the red cup with a towel", None, opts))
    assert reader.graph_reads == reads + 1  # only the 30 s graph changed and was rebuilt
    assert memory.seg_ids["dry"] in [c.segment_id for c in again.lanes["graph"]]
    assert memory.seg_ids["dry"] not in [h.segment_id for h in first.hits]


# --- semantic ---------------------------------------------------------------------------------
def test_semantic_returns_facts_around_the_matching_ones(world):
    deps, reader, roles, memory, user = world
    result = run(search_semantic(deps, user, "what does I like, coffee?"))
    facts = [(h.subject, h.predicate, h.object) for h in result.hits]
    assert facts[0][2] == "coffee" or facts[1][2] == "coffee"
    assert ("I", "likes", "coffee") in facts
    assert ("I", "likes", "tea") not in facts  # consolidated away
    assert len(result.hits) <= deps.settings.semantic_top_k
    assert all(h.valid_from == at(0) for h in result.hits)
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_semantic_edge_score_ranks_seed_neighbourhood_first(world):
    deps, reader, roles, memory, user = world
    deps.settings = deps.settings.model_copy(update={"semantic_top_k": 2})
    result = run(search_semantic(deps, user, "Alex plays tennis"))
    assert {h.triple_id for h in result.hits} == {
        memory.triple_ids["tennis"],
        memory.triple_ids["club"],
    }


def test_semantic_as_of_sees_a_fact_removed_later(world):
    deps, reader, roles, memory, user = world
    past = run(search_semantic(deps, user, "I likes tea", as_of=at(3600)))
    hit = next(h for h in past.hits if h.object == "tea")
    assert hit.invalidated_at is None  # not yet removed at that time
    now = run(search_semantic(deps, user, "I likes tea"))
    assert "tea" not in [h.object for h in now.hits]
    before_anything = run(search_semantic(deps, user, "I likes tea", as_of=at(-1)))
    assert before_anything.hits == []


def test_semantic_drops_a_fact_removed_after_its_graph_was_cached(world):
    deps, reader, roles, memory, user = world
    deps.cache = MemoryCache()
    reader.fingerprint_override = "frozen"  # a change the fingerprint cannot see
    run(search_semantic(deps, user, "I likes coffee"))  # caches the graph
    # consolidation removes the coffee fact, the cached graph still has it
    memory.remove("coffee", at(100))
    result = run(search_semantic(deps, user, "I likes coffee"))
    assert memory.triple_ids["coffee"] not in [h.triple_id for h in result.hits]


# --- visual ----------------------------------------------------------------------------------
def test_visual_feature_mode_returns_frames_of_best_clips(world):
    deps, reader, roles, memory, user = world
    result = run(search_visual(deps, user, "red cup kitchen"))
    assert deps.encoder.texts == ["red cup kitchen"]
    assert result.hits[0].segment_id == memory.seg_ids["cup"]
    first_clip = [h for h in result.hits if h.segment_id == memory.seg_ids["cup"]]
    assert 1 <= len(first_clip) <= 4
    assert all(at(0) <= h.ts < at(30) for h in first_clip)
    assert {h.segment_id for h in result.hits} <= {
        memory.seg_ids["cup"],
        memory.seg_ids["book"],
        memory.seg_ids["drive"],
    }


def test_visual_feature_mode_respects_as_of(world):
    deps, reader, roles, memory, user = world
    result = run(search_visual(deps, user, "blue car road", as_of=at(600)))
    assert memory.seg_ids["drive"] not in {h.segment_id for h in result.hits}
    assert ("search_visual", user, at(600)) in reader.calls


def test_visual_encoder_unavailable_is_an_empty_result_not_an_error(world):
    deps, reader, roles, memory, user = world
    deps.encoder.available = False
    result = run(search_visual(deps, user, "red cup"))
    assert result.hits == [] and "unavailable" in result.note
    assert result.as_text().startswith("(no results)")
    deps.encoder = None
    assert "not configured" in run(search_visual(deps, user, "red cup")).note


def test_visual_time_range_mode_needs_no_encoder(world):
    deps, reader, roles, memory, user = world
    deps.encoder = None
    result = run(search_visual(deps, user, "frames 2025-05-01T10:00:00Z to 2025-05-01T10:00:10Z"))
    assert len(result.hits) == 10  # frames every 0.5 s, thinned to one per second
    assert [h.ts for h in result.hits] == [at(i) for i in range(10)]
    long = run(search_visual(deps, user, "2025-05-01T10:00:00Z - 2025-05-01T10:02:00Z"))
    assert len(long.hits) == MAX_RANGE_FRAMES
    capped = run(
        search_visual(deps, user, "2025-05-01T10:00:00Z to 2025-05-01T11:00:00Z", as_of=at(5))
    )
    assert capped.hits and all(h.ts < at(5) for h in capped.hits)


# --- dispatch --------------------------------------------------------------------------------
def test_search_dispatches_by_memory_type(world):
    deps, reader, roles, memory, user = world
    assert run(search(deps, "semantic", user, "coffee")).memory_type == "semantic"
    with pytest.raises(ValueError, match="unknown memory type"):
        run(search(deps, "smell", user, "coffee"))
