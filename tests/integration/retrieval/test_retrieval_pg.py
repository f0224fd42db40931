"""Retrievers and the agent over the real store (PostgreSQL + pgvector) and the Redis cache."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis

from tests.fixtures.fake_models import search
from tests.fixtures.retrieval_memory import BOOK, CUP, MORNING, Memory, at
from tests.fixtures.store_reads import triples_for_graph
from worldmm.agent import answer_question
from worldmm.graph.cache import GraphCache, GraphMemo, cache_key
from worldmm.llm.schemas import AgentAction
from worldmm.memory.retrieval import (
    search_episodic,
    search_semantic,
    search_visual,
)
from worldmm.models import SCALES

# scripted roles, hash embeddings, the Redis graph cache; every lane on, the graph's too (its
# default weight is 0 with the offline triples)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(cache="graph_cache", episodic_lane_weights="lexical:1,dense:1,graph:0.5"),
]


@pytest.fixture
def memory(db, user_id, hash_embedder, visual_hash_embedder):
    m = Memory(db, user_id, hash_embedder, visual_hash_embedder)
    m.segment(*CUP, frame_count=60)
    m.segment(*BOOK)
    m.segment(*MORNING)
    m.segment("drive", 30, 3600, "Kate drives to work in a blue car at 11:00.",
              [("Kate", "drives to", "work", False), ("Kate", "leaves at", "11:00", True)],
              clip_text="blue car road")  # fmt: skip
    m.fact("coffee", "I", "likes", "coffee", at(0))
    m.fact("tea", "I", "likes", "tea", at(0))
    m.fact("friend", "Kate", "is friend of", "I", at(0))
    m.fact("tennis", "Alex", "plays", "tennis", at(0))
    m.remove("tea", at(1800))
    return m


@pytest.fixture
def graph_cache(settings):
    cache = GraphCache.from_url(settings.redis_url, ttl_s=300)
    yield cache
    cache.close()


def run(coro):
    return asyncio.run(coro)


def test_episodic_over_the_store(deps, memory, user_id):
    result = run(search_episodic(deps, user_id, "Which red cup did Kate hand me?"))
    assert result.hits[0].segment_id == memory.seg_ids["cup"]
    assert result.hits[0].start == at(0) and result.hits[0].end == at(30)
    assert result.hits[0].text.startswith("Kate hands me")
    # found by the words of its caption (PostgreSQL full-text), its text embedding, and the
    # graph (seeded by the facts of the windows nearest the question)
    assert set(result.hits[0].lanes) == {"lexical", "dense", "graph"}
    assert deps.roles.rerank_calls == []  # the rerank model is off by default


def test_episodic_as_of_and_user_isolation(deps, memory, user_id):
    now = run(search_episodic(deps, user_id, "Kate drives to work in a blue car"))
    assert memory.seg_ids["drive"] in [h.segment_id for h in now.hits]
    past = run(search_episodic(deps, user_id, "Kate drives to work in a blue car", as_of=at(600)))
    assert memory.seg_ids["drive"] not in [h.segment_id for h in past.hits]
    assert past.hits and all(h.end <= at(600) for h in past.hits)
    other = run(search_episodic(deps, user_id + "-other", "Kate drives to work"))
    assert other.hits == []


def graph_lane(deps, memory, user_id, query: str) -> list[int]:
    """Segment ids the graph lane ranks over every scale (no seeds but the query's facts):
    these tests are about the graphs, not about how episodic search fuses its lanes."""
    from worldmm.memory.retrieval.graph_lanes import rank_scale

    qvec = memory.text.embed([query])[0]
    return [sid for s in SCALES for sid, _ in rank_scale(deps, user_id, s, 5, qvec, {}, None)]


def test_graphs_are_cached_per_key_and_grow_without_invalidation(deps, memory, user_id, settings):
    raw = redis.Redis.from_url(settings.redis_url)
    try:
        graph_lane(deps, memory, user_id, "red cup")
        run(search_semantic(deps, user_id, "coffee"))
        keys = {k.decode() for k in raw.keys(f"worldmm:graph:{user_id}:*")}
        # one time-masked graph per key serves "now" and every as_of
        assert cache_key(user_id, "semantic") in keys
        assert {cache_key(user_id, "episodic", s) for s in (30, 180, 600, 3600)} <= keys
        before = {k: raw.get(k) for k in keys}
        # a new triple in the 30 s graph: writers tell the cache nothing
        memory.segment(
            "sink", 30, 60, "I wash the red cup at the sink.", [("I", "wash", "red cup", False)]
        )
        assert [k for k in keys if raw.get(k) != before[k]] == []  # kept as a base to extend
        result = graph_lane(deps, memory, user_id, "I wash the red cup at the sink")
        assert memory.seg_ids["sink"] in result
        # A new process (empty memo) starts from the Redis copy and extends it by the new row.
        deps.graphs = GraphMemo()
        result = graph_lane(deps, memory, user_id, "I wash the red cup at the sink")
        assert memory.seg_ids["sink"] in result
        assert raw.get(cache_key(user_id, "episodic", 30)).startswith(b"WMT2")
        # and again: the fingerprint check sees every new row
        memory.segment(
            "towel", 30, 90, "I dry the red cup with a towel.", [("I", "dry", "red cup", False)]
        )
        result = graph_lane(deps, memory, user_id, "I dry the red cup with a towel")
        assert memory.seg_ids["towel"] in result
    finally:
        raw.close()


def test_new_rows_extend_the_cached_graph_and_a_forget_rebuilds_it(deps, memory, user_id, caplog):
    from worldmm.graph.timed import build_timed
    from worldmm.memory.retrieval.graph_lanes import load_timed
    from worldmm.store.purge import forget_range

    def shape(g):
        units = zip(g.src, g.dst, g.ukind, g.weight, g.t_from, strict=True)
        return (g.names, list(g.v_from), sorted(tuple(map(float, u)) for u in units))

    def paths():
        return [r.message.split()[1] for r in caplog.records if "scale=30 " in r.message]

    caplog.set_level(logging.INFO, logger="worldmm.memory.retrieval.graph_lanes")
    graph_lane(deps, memory, user_id, "red cup")  # builds and caches every scale
    memory.segment(
        "sink", 30, 60, "I wash the red cup at the sink.", [("I", "wash", "red cup", False)]
    )
    caplog.clear()
    result = graph_lane(deps, memory, user_id, "I wash the red cup at the sink")
    assert memory.seg_ids["sink"] in result
    assert paths() == ["source=extended"]  # not rebuilt from every row
    grown = load_timed(deps.reader, deps.cache, deps.graphs, user_id, "episodic", 30)
    assert shape(grown) == shape(
        build_timed("episodic", deps.reader.graph_history(user_id, "episodic", 30))
    )

    with memory.db.transaction() as conn:  # rows leave: extending cannot express that
        forget_range(conn, user_id, at(60), at(90))
    caplog.clear()
    result = graph_lane(deps, memory, user_id, "I wash the red cup at the sink")
    assert memory.seg_ids["sink"] not in result
    # Not extended, and not the first build's copy in Redis either: the rows are those of the
    # first build again, but the kept fingerprint's highest id never goes down, so it differs
    # from that copy's and the graph is rebuilt from the rows left.
    assert paths() == ["source=built"]
    rebuilt = load_timed(deps.reader, deps.cache, deps.graphs, user_id, "episodic", 30)
    assert shape(rebuilt) == shape(
        build_timed("episodic", deps.reader.graph_history(user_id, "episodic", 30))
    )


def test_semantic_over_the_store(deps, memory, user_id):
    now = run(search_semantic(deps, user_id, "what do I like"))
    facts = {(h.subject, h.predicate, h.object) for h in now.hits}
    assert ("I", "likes", "coffee") in facts
    assert ("I", "likes", "tea") not in facts
    assert all(h.valid_from == at(0) for h in now.hits)
    past = run(search_semantic(deps, user_id, "what do I like", as_of=at(900)))
    assert ("I", "likes", "tea") in {(h.subject, h.predicate, h.object) for h in past.hits}
    assert all(h.invalidated_at is None for h in past.hits)


def test_visual_over_the_store(deps, memory, user_id):
    feature = run(search_visual(deps, user_id, "red cup kitchen"))
    assert feature.hits[0].segment_id == memory.seg_ids["cup"]
    assert feature.hits[0].key.startswith(f"{user_id}/frames/")
    assert 1 <= sum(h.segment_id == memory.seg_ids["cup"] for h in feature.hits) <= 4
    past = run(search_visual(deps, user_id, "blue car road", as_of=at(600)))
    assert memory.seg_ids["drive"] not in {h.segment_id for h in past.hits}
    window = run(search_visual(deps, user_id, "2025-05-01T10:00:00Z to 2025-05-01T10:00:20Z"))
    assert [h.ts for h in window.hits] == [at(i) for i in range(20)]


def test_agent_over_the_store(deps, memory, user_id):
    deps.roles.script = [
        search("episodic", "Kate red cup"),
        search("semantic", "I like"),
        search("visual", "red cup kitchen"),
        AgentAction(action="ANSWER"),
    ]
    result = run(answer_question(deps, user_id, "What did Kate give me?", as_of=at(3000)))
    assert result.stopped == "answer"
    assert [r.memory_type for r in result.rounds] == ["episodic", "semantic", "visual"]
    assert memory.seg_ids["cup"] in [e.segment_id for e in result.evidence]
    assert memory.seg_ids["drive"] not in [e.segment_id for e in result.evidence]
    assert ("I", "likes", "tea") not in {
        (t.subject, t.predicate, t.object) for t in result.triples
    }  # removed at 1800 < 3000
    assert result.frames and all(k.startswith(f"{user_id}/") for k in result.frames)


@pytest.mark.parametrize("method", ["prpack", "push"])
def test_as_of_on_the_cached_graph_equals_a_build_from_the_visible_rows(
    deps, memory, user_id, method
):
    """The graph lane at several ``as_of`` (one cached graph, masked) against the reference
    pipeline on a graph built from only the rows the store returns for that time."""
    from tests.fixtures import graph_oracle as oracle
    from worldmm.graph.pagerank import fact_seed_scores
    from worldmm.memory.retrieval.graph_lanes import (
        fact_seeds,
        fact_segment_scores,
        merge_scores,
        rank_scale,
    )
    from worldmm.memory.retrieval.reader import from_triple_row

    memory.segment(  # a later segment naming Kate again: hidden before 7200 s
        "late", 30, 7200, "Kate parks the blue car.", [("Kate", "parks", "blue car", False)]
    )
    deps.settings = deps.settings.model_copy(
        update={"ppr_method": method, "ppr_push_epsilon": 1e-10}
    )
    user = user_id
    qvec = memory.text.embed(["Kate and the blue car"])[0]
    names = {"e:kate": 0.9, "e:blue car": 0.8}
    for when in (at(30), at(60), at(3630), at(7229), at(7230), None):
        facts = fact_seeds(deps, user, qvec, 30, when)
        with memory.db.connection() as conn:  # the rows the store says exist at that time
            rows = [from_triple_row(r) for r in triples_for_graph(conn, user, "episodic", 30, when)]
        seeds = merge_scores(names, fact_seed_scores(facts))
        want = oracle.rank("episodic", rows, None, seeds, 10, fact_segment_scores(facts))
        got = rank_scale(deps, user, 30, 10, qvec, names, when)
        assert [sid for sid, _ in got] == [sid for sid, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-7)
    assert memory.seg_ids["late"] in [sid for sid, _ in got]  # the last round was "now"


def test_option_notes_read_word_shares_from_the_store_and_times_at_the_question(
    deps, memory, user_id
):
    from zoneinfo import ZoneInfo

    from worldmm.agent.option_notes import option_notes
    from worldmm.localtime import Asked

    asked = Asked(at(7200), ZoneInfo("UTC"))
    choices = ["Kate", "Alex's book", "the zebra", "About an hour ago"]
    kate, alex, zebra, hour = run(option_notes(deps, user_id, choices, asked))
    # Kate is in three of the four segments (the 3 min summary too), Alex in two
    assert kate.word_shares == {"kate": 0.75}
    assert alex.word_shares == {"alex's": 0.5, "book": 0.25}
    assert zebra.word_shares == {} and zebra.hours_before is None  # "the" has no lexeme
    assert hour.hours_before == (0.0, 2.0)  # an hour ago, an hour either side
