"""The time-masked graph: a query "as of" T on the whole history equals a reference igraph
pipeline on a graph built from only the rows visible at T (seeding, propagation and ranking;
:mod:`tests.fixtures.graph_oracle`), for both solvers; it grows by appending; local push
matches exact PPR on hand-built graphs."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from tests.fixtures import graph_oracle as oracle
from worldmm.graph.pagerank import PprScores, ppr, seed_vertices
from worldmm.graph.timed import TimedGraph, build_timed, extend, to_micros
from worldmm.graph.types import GraphTriple, entity_node, segment_node
from worldmm.memory.retrieval import semantic
from worldmm.memory.retrieval.graph_lanes import top_segments
from worldmm.memory.retrieval.semantic import top_triple_units

T0 = datetime(2026, 3, 1, 8, tzinfo=UTC)
WORDS = ["kate", "alex", "cup", "sink", "car", "book", "sofa", "tea", "coffee", "dog", "park"]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def episodic_rows(seed: int, segments: int = 40) -> list[GraphTriple]:
    """Segments of 30 s, 1-4 triples each, ids roughly (not exactly) in time order."""
    rnd = random.Random(seed)
    rows: list[GraphTriple] = []
    tid = 0
    order = list(range(segments))
    rnd.shuffle(order[-6:])  # a few late segments: ids out of time order
    for s in order:
        for _ in range(rnd.randint(1, 4)):
            tid += 1
            literal = rnd.random() < 0.15
            rows.append(
                GraphTriple(
                    triple_id=tid,
                    subject=rnd.choice(WORDS[:5]),
                    predicate="p",
                    object=f"{rnd.randint(1, 9)} pm" if literal else rnd.choice(WORDS),
                    object_is_literal=literal,
                    segment_id=100 + s,
                    scale=30,
                    valid_from=at(30 * (s + 1)),
                )
            )
    return rows


def semantic_rows(seed: int, n: int = 40) -> list[GraphTriple]:
    rnd = random.Random(seed)
    rows = []
    for tid in range(1, n + 1):
        start = rnd.randint(0, 1000)
        gone = at(start + rnd.randint(1, 600)) if rnd.random() < 0.3 else None
        rows.append(
            GraphTriple(
                triple_id=tid,
                subject=rnd.choice(WORDS[:5]),
                predicate=rnd.choice(["likes", "owns", "visits"]),
                object=rnd.choice(WORDS),
                valid_from=at(start),
                invalidated_at=gone,
            )
        )
    return rows


def by_id(ranked: list[tuple[int, float]]) -> dict[int, float]:
    return dict(ranked)


def top_triples(
    graph: TimedGraph, result: PprScores, as_of: int | None, k: int
) -> list[tuple[int, float]]:
    """Semantic ranking as (triple id, score)."""
    ranked = top_triple_units(graph, result, as_of, k)
    return [(int(graph.triple_id[u]), s) for u, s in ranked]


def assert_same_ranking(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """Equal scores position by position; ids equal except inside exact ties."""
    assert len(got) == len(want)
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6, abs=1e-12)
    for (gid, gs), (wid, ws) in zip(got, want, strict=True):
        if gid != wid:  # allowed only when both scores tie with another listed item
            assert by_id(want).get(gid) == pytest.approx(gs, rel=1e-6)
            assert by_id(got).get(wid, ws) == pytest.approx(ws, rel=1e-6)


CUTOFFS = [None, at(29), at(30), at(200), at(615), at(900), at(5000)]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("as_of", CUTOFFS)
def test_episodic_as_of_equals_a_build_from_the_visible_rows(seed, as_of):
    rows = episodic_rows(seed)
    timed = build_timed("episodic", rows)
    names = {entity_node("kate"): 0.9, entity_node("car"): 0.4, entity_node("zebra"): 1.0}
    dense = {100: 0.8, 120: 0.5, 139: 0.7}
    want = oracle.rank("episodic", rows, as_of, names, 10, dense)
    micros = None if as_of is None else to_micros(as_of)
    reset = seed_vertices(timed, names, micros, dense)
    got = top_segments(timed, ppr(timed, reset, micros, 0.85, "prpack"), micros, 10)
    assert_same_ranking(got, want)
    # Local push at a tight bound: the same top-k, scores within its error bound.
    pushed = top_segments(timed, ppr(timed, reset, micros, 0.85, "push", 1e-10), micros, 10)
    positive = [(i, s) for i, s in want if s > 1e-6]
    assert [i for i, _ in pushed[: len(positive)]] == [i for i, _ in positive] or (
        by_id(pushed) == pytest.approx(by_id(positive), abs=1e-6)
    )
    for i, s in pushed:
        assert s == pytest.approx(by_id(want)[i], abs=1e-6)


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize("as_of", [None, at(-1), at(300), at(700), at(1200), at(4000)])
def test_semantic_as_of_equals_a_build_from_the_active_rows(seed, as_of):
    rows = semantic_rows(seed)
    timed = build_timed("semantic", rows)
    names = {entity_node("kate"): 0.7, entity_node("tea"): 0.5}
    want = oracle.rank("semantic", rows, as_of, names, 8)
    micros = None if as_of is None else to_micros(as_of)
    reset = seed_vertices(timed, names, micros)
    got = top_triples(timed, ppr(timed, reset, micros, 0.85, "prpack"), micros, 8)
    if not want:
        assert all(s == 0 for _, s in got) or not got
        return
    assert_same_ranking(got, want)


def test_a_name_not_yet_seen_is_no_seed_and_nothing_later_is_ranked():
    rows = episodic_rows(7)
    timed = build_timed("episodic", rows)
    cut = to_micros(at(60))  # only segments 100 and 101 exist
    late = next(r for r in rows if r.valid_from > at(60))
    reset = seed_vertices(timed, {entity_node(late.subject): 1.0}, cut)
    early = {entity_node(r.subject) for r in rows if r.valid_from <= at(60)}
    assert bool(reset) == (entity_node(late.subject) in early)
    ranked = top_segments(timed, ppr(timed, reset, cut, 0.85, "prpack"), cut, 50)
    assert {sid for sid, _ in ranked} <= {100, 101}
    assert seed_vertices(timed, {}, cut, {139: 1.0}) == {}  # segment 139 is later


def test_extend_equals_a_build_over_all_rows():
    rows = episodic_rows(11, segments=60)
    whole = build_timed("episodic", rows)
    grown = build_timed("episodic", rows[:50], seal_every=25)
    for i in range(50, len(rows), 7):  # appended in small steps; sealed along the way
        grown = extend(grown, rows[i : i + 7])
    assert grown.names == whole.names
    assert np.array_equal(grown.v_from, whole.v_from)
    names = {entity_node("alex"): 1.0}
    for as_of in (None, to_micros(at(900))):
        a = ppr(whole, seed_vertices(whole, names, as_of), as_of, 0.85, "push", 1e-9)
        b = ppr(grown, seed_vertices(grown, names, as_of), as_of, 0.85, "push", 1e-9)
        assert_same_ranking(top_segments(grown, b, as_of, 10), top_segments(whole, a, as_of, 10))
    first = build_timed("episodic", rows[:50], seal_every=25)
    assert grown.sealed > first.units  # the tail was folded into the CSR on the way
    assert grown.units - grown.sealed <= 25


def test_extend_leaves_the_base_graph_unchanged():
    rows = episodic_rows(12)
    base = build_timed("episodic", rows[:20])
    before = (list(base.names), base.src.copy(), base.v_from.copy())
    extend(base, rows[20:])
    assert (base.names, list(base.src), list(base.v_from)) == (
        before[0],
        list(before[1]),
        list(before[2]),
    )


def test_segment_seed_is_the_segments_vertex():
    rows = episodic_rows(13)
    timed = build_timed("episodic", rows)
    reset = seed_vertices(timed, {}, None, {100: 1.0}, segment_weight=0.05)
    assert reset == {timed.position[segment_node(100)]: pytest.approx(0.05)}


# --- compact bytes --------------------------------------------------------------------------
@pytest.mark.parametrize("memory_type", ["episodic", "semantic"])
def test_numpy_buffers_round_trip_the_graph(memory_type):
    from worldmm.graph.cache import TimedFormatError, dumps_timed, loads_timed

    rows = episodic_rows(21) if memory_type == "episodic" else semantic_rows(22)
    g = build_timed(memory_type, rows[:-5], seal_every=3)
    g = extend(g, rows[-5:])  # a tail the CSR does not cover yet travels too
    g.fingerprint = "12:34:5"
    back = loads_timed(dumps_timed(g))
    assert (back.memory_type, back.fingerprint, back.names, back.label) == (
        g.memory_type,
        g.fingerprint,
        g.names,
        g.label,
    )
    assert back.predicate == g.predicate and back.sealed == g.sealed
    for attr in ("kind", "segment_id", "v_from", "src", "dst", "ukind", "weight", "t_from"):
        assert np.array_equal(getattr(back, attr), getattr(g, attr)), attr
    assert np.array_equal(back.t_to, g.t_to) and np.array_equal(back.triple_id, g.triple_id)
    assert np.array_equal(back.csr.indptr, g.csr.indptr)
    names = {entity_node("kate"): 1.0}
    for as_of in (None, to_micros(at(400))):
        a = ppr(g, seed_vertices(g, names, as_of), as_of, 0.85, "push", 1e-9)
        b = ppr(back, seed_vertices(back, names, as_of), as_of, 0.85, "push", 1e-9)
        assert np.array_equal(a.vertices, b.vertices) and np.allclose(a.scores, b.scores)
    data = dumps_timed(g)
    assert dumps_timed(g)[:12] != data[:12]  # a fresh nonce: the cache compares prefixes
    for bad in (b"WMG1" + data[4:], data[:-3], data + b"x"):
        with pytest.raises(TimedFormatError):
            loads_timed(bad)


# --- local push against exact PPR on hand-built graphs --------------------------------------
def _graph_rows(edges: list[tuple[str, str, int]]) -> list[GraphTriple]:
    """Episodic rows (subject, object, segment) with valid_from = the segment's end."""
    return [
        GraphTriple(
            triple_id=i + 1,
            subject=s,
            predicate="p",
            object=o,
            segment_id=seg,
            scale=30,
            valid_from=at(30 * seg),
        )
        for i, (s, o, seg) in enumerate(edges)
    ]


HAND_BUILT = {
    # a hub the query names, a chain leading away from it, and an unrelated cluster
    "hub_and_chain": [("hub", f"x{i}", i) for i in range(1, 8)]
    + [("x7", "y1", 8), ("y1", "y2", 9), ("y2", "y3", 10), ("far", "away", 11)],
    # two communities joined by one bridge segment
    "two_communities": [("a", "b", 1), ("b", "c", 2), ("a", "c", 3), ("c", "d", 4)]
    + [("p", "q", 5), ("q", "r", 6), ("p", "r", 7), ("d", "p", 8)],
}


@pytest.mark.parametrize("name", sorted(HAND_BUILT))
@pytest.mark.parametrize("seed_name", ["hub", "a", "x7", "c"])
def test_local_push_top_k_equals_exact_pagerank(name, seed_name):
    rows = _graph_rows(HAND_BUILT[name])
    g = build_timed("episodic", rows)
    names = {entity_node(seed_name): 1.0, entity_node("q"): 0.3}
    want = oracle.rank("episodic", rows, None, names, 5)
    reset = seed_vertices(g, names, None)
    got = top_segments(g, ppr(g, reset, None, 0.85, "push", 1e-12), None, 5)
    assert_same_ranking(got, want)
    exact = top_segments(g, ppr(g, reset, None, 0.85, "prpack"), None, 5)
    assert_same_ranking(exact, want)


def test_extension_carries_degrees_and_segments_as_a_fresh_build_has_them():
    rows = semantic_rows(31) + []  # semantic: some appended rows are soft-deleted already
    base = build_timed("semantic", rows[:25])
    base.degrees_now(), base.segment_vertices()
    grown = extend(base, rows[25:])
    fresh = build_timed("semantic", rows)
    assert np.allclose(grown._deg_now, fresh.degrees_now())
    ep = episodic_rows(32)
    base = build_timed("episodic", ep[:30])
    base.degrees_now(), base.segment_vertices()
    grown = extend(base, ep[30:])
    fresh = build_timed("episodic", ep)
    assert np.allclose(grown._deg_now, fresh.degrees_now())
    assert list(grown._segments) == list(fresh.segment_vertices())


def many_semantic_rows(
    seed: int, n: int = 900, names: int = 150, hub_share: float = 0.5
) -> list[GraphTriple]:
    """A wider fact graph than :func:`semantic_rows`: more entities than the ranking reads
    first, ``hub_share`` of the facts about one of five hubs, some pairs stated by several
    facts, some facts soft-deleted."""
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(names)]
    rows = []
    for tid in range(1, n + 1):
        start = rnd.randint(0, 1000)
        gone = at(start + rnd.randint(1, 600)) if rnd.random() < 0.2 else None
        subject = rnd.choice(words[:5]) if rnd.random() < hub_share else rnd.choice(words)
        rows.append(
            GraphTriple(
                triple_id=tid,
                subject=subject,
                predicate=rnd.choice(["likes", "owns", "visits"]),
                object=rnd.choice(words),
                valid_from=at(start),
                invalidated_at=gone,
            )
        )
    return rows


# (hub share, seeds): five hubs and two seeds; then no hub and sixty equal seeds, so the
# best facts join vertices ranked far down
CASES = {
    "hubs": (0.5, {entity_node("w7"): 0.8, entity_node("w40"): 0.5}),
    "flat": (0.0, {entity_node(f"w{i}"): 1.0 for i in range(60, 120)}),
}


@pytest.mark.parametrize("seed", [6, 7, 8])
@pytest.mark.parametrize("as_of", [None, at(500), at(1500)])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("first", [2, semantic.FIRST_VERTICES])
def test_a_wide_fact_graph_is_ranked_from_its_best_vertices_as_the_oracle_ranks_it(
    seed, as_of, case, first, monkeypatch
):
    """From the shipped first read, and from two vertices, so that it must read more."""
    monkeypatch.setattr(semantic, "FIRST_VERTICES", first)
    hub_share, names = CASES[case]
    rows = many_semantic_rows(seed, hub_share=hub_share)
    timed = build_timed("semantic", rows)
    want = oracle.rank("semantic", rows, as_of, names, 10)
    read: list[int] = []
    rank_units = semantic._rank_units

    def counted(graph, score, vertices, at_, k):
        read.append(len(vertices))
        return rank_units(graph, score, vertices, at_, k)

    monkeypatch.setattr(semantic, "_rank_units", counted)
    micros = None if as_of is None else to_micros(as_of)
    reset = seed_vertices(timed, names, micros)
    got = top_triples(timed, ppr(timed, reset, micros, 0.85, "prpack"), micros, 10)
    assert_same_ranking(got, want)
    assert read and read[0] == first
    if case == "hubs" and first > 2:  # the hubs' facts lead: it stopped there
        assert max(read) < timed.n


def test_tied_facts_come_in_unit_order_as_when_every_vertex_is_read():
    rows = [
        GraphTriple(
            triple_id=i, subject="hub", predicate="likes", object=f"leaf{i}", valid_from=at(0)
        )
        for i in range(1, 201)
    ]
    timed = build_timed("semantic", rows)
    reset = seed_vertices(timed, {entity_node("hub"): 1.0}, None)
    result = ppr(timed, reset, None, 0.85, "prpack")
    score = np.zeros(timed.n)
    score[result.vertices] = result.scores
    every = semantic._rank_units(timed, score, np.arange(timed.n), None, 5)
    assert top_triple_units(timed, result, None, 5) == every
    assert [int(timed.triple_id[u]) for u, _ in every] == [1, 2, 3, 4, 5]
