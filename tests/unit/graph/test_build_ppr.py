"""Graph building, PPR seeding and scoring on hand-built graphs with known rankings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import igraph as ig
import numpy as np
import pytest

from worldmm.graph.build import build_episodic_graph, build_graph, build_semantic_graph
from worldmm.graph.ppr import (
    fact_seed_scores,
    personalized_pagerank,
    seed_vector,
    segments_per_vertex,
)
from worldmm.graph.scoring import edge_scores, top_segments, top_triples
from worldmm.graph.serialize import GraphFormatError, dumps, loads
from worldmm.graph.types import GraphTriple, entity_node, literal_node, segment_node


def t(tid, s, p, o, seg=None, literal=False, **kw) -> GraphTriple:
    return GraphTriple(
        triple_id=tid,
        subject=s,
        predicate=p,
        object=o,
        object_is_literal=literal,
        segment_id=seg,
        scale=30,
        **kw,
    )


def vid(g: ig.Graph, name: str) -> int:
    return g.vs.find(name=name).index


# --- building --------------------------------------------------------------------------
def test_episodic_graph_has_entities_segments_and_weighted_edges():
    g = build_episodic_graph(
        [
            t(1, "Kate", "holds", "Cup", seg=10),
            t(2, "kate", "drinks from", "cup", seg=10),  # same pair, other case: one edge, weight 2
            t(3, "Kate", "meets", "Alex", seg=11),
            t(4, "Meeting", "starts at", "2:30 PM", seg=11, literal=True),
        ]
    )
    kinds = dict(zip(g.vs["name"], g.vs["kind"], strict=True))
    assert kinds[entity_node("Kate")] == "entity"
    assert kinds[literal_node("Meeting", "2:30 PM")] == "literal"
    assert kinds[segment_node(10)] == "segment"
    assert g.vs[vid(g, segment_node(11))]["segment_id"] == 11
    assert g.vs[vid(g, entity_node("Kate"))]["segment_id"] is None

    kate, cup = vid(g, entity_node("kate")), vid(g, entity_node("CUP"))
    e = g.es[g.get_eid(kate, cup)]
    assert (e["kind"], e["weight"]) == ("relation", 2.0)
    # Kate is mentioned by two triples of segment 10: one mention edge of weight 2.
    m = g.es[g.get_eid(kate, vid(g, segment_node(10)))]
    assert (m["kind"], m["weight"]) == ("mention", 2.0)
    # The literal is a leaf of its subject only (no segment edge).
    lit = vid(g, literal_node("Meeting", "2:30 PM"))
    assert g.neighbors(lit) == [vid(g, entity_node("Meeting"))]
    # Meeting itself still points at its segment.
    assert g.are_adjacent(vid(g, entity_node("Meeting")), vid(g, segment_node(11)))


def test_same_literal_under_two_subjects_stays_two_leaves():
    g = build_episodic_graph(
        [
            t(1, "Lunch", "starts at", "12:00", seg=1, literal=True),
            t(2, "Call", "starts at", "12:00", seg=1, literal=True),
        ]
    )
    assert g.vs["kind"].count("literal") == 2
    lunch, call = vid(g, entity_node("Lunch")), vid(g, entity_node("Call"))
    assert g.distances(lunch, call)[0][0] == 2  # only via the segment, not via "12:00"


def test_semantic_graph_one_edge_per_active_triple():
    now = datetime(2025, 1, 1, tzinfo=UTC)
    g = build_semantic_graph(
        [
            t(1, "I", "likes", "coffee"),
            t(2, "I", "drinks", "coffee"),
            t(3, "I", "dislikes", "coffee", invalidated_at=now),
        ]
    )
    assert g.vcount() == 2
    assert sorted(g.es["triple_id"]) == [1, 2]
    assert set(g.es["predicate"]) == {"likes", "drinks"}
    # as of a time before the removal, the removed fact was still active
    earlier = build_semantic_graph(
        [t(3, "I", "dislikes", "coffee", invalidated_at=now)], as_of=now - timedelta(days=1)
    )
    assert earlier.es["triple_id"] == [3]


def test_semantic_edge_remembers_subject_direction_and_valid_from():
    since = datetime(2025, 3, 1, 12, tzinfo=UTC)
    # "z" is added first as an object, so the edge is stored as (a, z) with z < a by index
    g = build_semantic_graph([t(1, "x", "r", "z"), t(2, "a", "likes", "z", valid_from=since)])
    e = g.es.find(triple_id=2)
    assert g.vs[e["subject"]]["label"] == "a"
    assert e["valid_from"] == since.isoformat()
    assert loads(dumps(g)).es.find(triple_id=2)["subject"] == e["subject"]


def test_build_graph_rejects_visual():
    with pytest.raises(ValueError, match="visual"):
        build_graph("visual", [])


# --- PPR ---------------------------------------------------------------------------------
def test_chain_seed_neighbour_ranks_first():
    # a - b - c - d chained by triples; seeding the end vertex a, its neighbour b collects the
    # most mass (a gives everything to b, b splits between a and c).
    g = build_semantic_graph([t(1, "a", "r", "b"), t(2, "b", "r", "c"), t(3, "c", "r", "d")])
    res = personalized_pagerank(g, seed_vector(g, {entity_node("a"): 1.0}), damping=0.85)
    assert not res.fallback
    order = [g.vs[i]["name"] for i in np.argsort(-res.scores)]
    assert order == [entity_node(x) for x in "bacd"]
    assert res.scores.sum() == pytest.approx(1.0)


def test_star_leaf_seed_feeds_hub_then_itself_then_other_leaves():
    g = build_semantic_graph([t(i, "hub", "r", f"leaf{i}") for i in range(5)])
    res = personalized_pagerank(g, seed_vector(g, {entity_node("leaf0"): 1.0}))
    hub, leaf0 = vid(g, entity_node("hub")), vid(g, entity_node("leaf0"))
    others = [vid(g, entity_node(f"leaf{i}")) for i in range(1, 5)]
    # the seeded leaf's only neighbour (the hub) ranks first, then the seed, then the rest
    assert res.scores[hub] > res.scores[leaf0] > max(res.scores[o] for o in others)
    assert np.allclose([res.scores[o] for o in others], res.scores[others[0]])


def test_episodic_seed_ranks_segment_of_that_entity_first():
    g = build_episodic_graph(
        [
            t(1, "Kate", "holds", "Cup", seg=1),
            t(2, "Alex", "reads", "Book", seg=2),
            t(3, "Alex", "closes", "Door", seg=3),
        ]
    )
    res = personalized_pagerank(g, seed_vector(g, {entity_node("Book"): 1.0}))
    assert top_segments(g, res.scores, 3)[0][0] == 2
    res = personalized_pagerank(g, seed_vector(g, {entity_node("Kate"): 1.0}))
    assert [s for s, _ in top_segments(g, res.scores, 1)] == [1]


def test_seed_weight_divided_by_segments_holding_the_entity():
    g = build_episodic_graph(
        [
            t(1, "I", "walk", "Street", seg=1),
            t(2, "I", "eat", "Apple", seg=2),
            t(3, "I", "see", "Dog", seg=3),
            t(4, "Kate", "pets", "Dog", seg=3),
        ]
    )
    spread = segments_per_vertex(g)
    assert spread[vid(g, entity_node("I"))] == 3
    assert spread[vid(g, entity_node("Kate"))] == 1
    assert spread[vid(g, segment_node(1))] == 0
    reset = seed_vector(g, {entity_node("I"): 0.9, entity_node("Kate"): 0.6, "e:unknown": 5.0})
    assert reset[vid(g, entity_node("I"))] == pytest.approx(0.3)
    assert reset[vid(g, entity_node("Kate"))] == pytest.approx(0.6)
    assert reset.sum() == pytest.approx(0.9)  # the unknown name is ignored


def test_dense_segment_scores_add_a_small_normalised_weight():
    g = build_episodic_graph([t(1, "a", "r", "b", seg=1), t(2, "c", "r", "d", seg=2)])
    reset = seed_vector(g, {}, {1: 0.8, 2: 0.4, 99: 1.0}, segment_weight=0.05)
    # normalised by the best score (99's 1.0 counts even though it is not in the graph)
    assert reset[vid(g, segment_node(1))] == pytest.approx(0.04)
    assert reset[vid(g, segment_node(2))] == pytest.approx(0.02)
    res = personalized_pagerank(g, reset)
    assert not res.fallback
    assert [s for s, _ in top_segments(g, res.scores, 2)] == [1, 2]


def test_no_seed_falls_back_to_uniform_segment_reset():
    g = build_episodic_graph(
        [
            t(1, "a", "r", "b", seg=1),
            t(2, "a", "r", "c", seg=2),
            t(3, "d", "r", "e", seg=2),
            t(4, "f", "r", "g", seg=2),
        ]
    )
    res = personalized_pagerank(g, seed_vector(g, {"e:nothing": 1.0}))
    assert res.fallback
    assert res.scores.sum() == pytest.approx(1.0)
    # the busier segment is more central
    assert [s for s, _ in top_segments(g, res.scores, 2)] == [2, 1]


def test_fallback_without_segments_is_uniform_over_all_vertices():
    g = build_semantic_graph([t(1, "a", "r", "b"), t(2, "b", "r", "c")])
    res = personalized_pagerank(g, np.zeros(g.vcount()))
    assert res.fallback and res.scores.sum() == pytest.approx(1.0)


def test_empty_graph_and_bad_reset():
    g = build_semantic_graph([])
    assert personalized_pagerank(g, np.zeros(0)).scores.size == 0
    assert top_triples(g, np.zeros(0), 5) == []
    g = build_semantic_graph([t(1, "a", "r", "b")])
    with pytest.raises(ValueError, match="shape"):
        personalized_pagerank(g, np.zeros(5))


# --- scoring -----------------------------------------------------------------------------
def test_edge_score_is_sum_of_endpoint_scores_and_top_k_orders_them():
    g = build_semantic_graph(
        [
            t(10, "a", "r", "b"),
            t(11, "b", "r", "c"),
            t(12, "c", "r", "d"),
            t(13, "x", "r", "y"),
        ]
    )
    scores = np.zeros(g.vcount())
    for name, value in {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.05, "x": 0.05}.items():
        scores[vid(g, entity_node(name))] = value
    per_edge = edge_scores(g, scores)
    assert per_edge[g.es.find(triple_id=10).index] == pytest.approx(0.7)
    ranked = top_triples(g, scores, 3)
    assert [tid for tid, _ in ranked] == [10, 11, 12]
    assert [s for _, s in ranked] == pytest.approx([0.7, 0.5, 0.25])
    assert len(top_triples(g, scores, 100)) == 4


def test_semantic_ppr_from_fact_entities_ranks_adjacent_facts():
    g = build_semantic_graph(
        [
            t(1, "I", "likes", "coffee"),
            t(2, "coffee", "sold at", "Cafe Luna"),
            t(3, "Kate", "plays", "tennis"),
            t(4, "tennis", "played at", "Club"),
        ]
    )
    seeds = {entity_node("I"): 1.0, entity_node("coffee"): 1.0}
    res = personalized_pagerank(g, seed_vector(g, seeds))
    assert [tid for tid, _ in top_triples(g, res.scores, 2)] == [1, 2]


# --- serialisation ------------------------------------------------------------------------
def test_serialise_round_trip_keeps_structure_and_attributes():
    g = build_episodic_graph(
        [
            t(1, "Kate", "holds", "Cup", seg=1),
            t(2, "Meeting", "at", "2:30 PM", seg=2, literal=True),
        ]
    )
    back = loads(dumps(g))
    assert back.get_edgelist() == g.get_edgelist()
    for attr in ("name", "kind", "label", "segment_id"):
        assert back.vs[attr] == g.vs[attr]
    for attr in ("weight", "kind", "triple_id"):
        assert back.es[attr] == g.es[attr]
    reset = seed_vector(g, {entity_node("Kate"): 1.0})
    assert np.allclose(
        personalized_pagerank(back, reset).scores, personalized_pagerank(g, reset).scores
    )
    sem = build_semantic_graph([t(5, "a", "r", "b")])
    assert loads(dumps(sem)).es["triple_id"] == [5]


def test_serialise_keeps_the_fingerprint_and_never_repeats_a_prefix():
    g = build_semantic_graph([t(1, "a", "r", "b")])
    g["fingerprint"] = "1:1"
    one, two = dumps(g), dumps(g)
    assert loads(one)["fingerprint"] == "1:1"
    assert one[:64] != two[:64]


def test_fact_seed_scores_sum_per_vertex_and_ignore_negative_cosines():
    facts = [
        (t(1, "Kate", "hands", "cup"), 0.8),
        (t(2, "Kate", "leaves at", "11:00", literal=True), 0.5),
        (t(3, "Alex", "reads", "book"), -0.2),
    ]
    scores = fact_seed_scores(facts)
    assert scores[entity_node("kate")] == pytest.approx(1.3)
    assert scores[literal_node("Kate", "11:00")] == pytest.approx(0.5)
    assert scores[entity_node("cup")] == pytest.approx(0.8)
    assert scores[entity_node("alex")] == 0.0


def test_loads_rejects_foreign_and_corrupt_bytes():
    with pytest.raises(GraphFormatError, match="magic"):
        loads(b"\x80\x04pickle")
    with pytest.raises(GraphFormatError, match="corrupt"):
        loads(dumps(build_semantic_graph([t(1, "a", "r", "b")]))[:-4])


def test_graph_index_is_built_once_and_survives_no_serialisation():
    from worldmm.graph.index import INDEX_ATTR, build_index, graph_index

    g = build_episodic_graph([t(1, "a", "r", "b", seg=5), t(2, "a", "r", "c", seg=6)])
    first = graph_index(g)
    assert graph_index(g) is first  # kept on the graph: the next query reuses it
    fresh = build_index(g)
    assert first.position == fresh.position and list(first.segment_ids) == [5, 6]
    assert np.array_equal(first.spread, fresh.spread)
    assert INDEX_ATTR not in loads(dumps(g)).attributes()  # never written to Redis


def test_top_segments_breaks_ties_in_vertex_order():
    g = build_episodic_graph([t(i, "hub", "r", f"x{i}", seg=10 + i) for i in range(4)])
    scores = np.zeros(g.vcount())
    for i in range(4):  # all four segments tie
        scores[vid(g, segment_node(10 + i))] = 0.25
    assert [s for s, _ in top_segments(g, scores, 3)] == [10, 11, 12]


def _shape(g: ig.Graph) -> tuple:
    return (
        g.vs["name"],
        g.vs["kind"],
        g.vs["label"],
        g.vs["segment_id"],
        g.get_edgelist(),
        g.es["weight"],
        g.es["kind"],
    )


@pytest.mark.parametrize("split", [0, 1, 3, 5, 7])
def test_extending_a_graph_equals_building_it_from_all_rows(split):
    from worldmm.graph.build import extend_episodic_graph
    from worldmm.graph.index import graph_index

    rows = [
        t(1, "I", "hold", "Cup", seg=1),
        t(2, "Kate", "hands", "Cup", seg=1),
        t(3, "I", "hold", "Cup", seg=2),  # an existing relation edge gets heavier
        t(4, "I", "leave at", "9:00", seg=2, literal=True),
        t(5, "Kate", "hands", "Cup", seg=3),
        t(6, "Alex", "reads", "Book", seg=3),
        t(7, "I", "hold", "Cup"),  # no segment
        t(8, "Book", "lies on", "Table", seg=4),
    ]
    base = build_episodic_graph(rows[:split])
    graph_index(base)  # a cached index on the base must not leak into the result
    before = _shape(base)
    grown = extend_episodic_graph(base, rows[split:])
    assert _shape(grown) == _shape(build_episodic_graph(rows))
    assert _shape(base) == before  # the base is shared with other queries: untouched
    assert graph_index(grown).position == {n: i for i, n in enumerate(grown.vs["name"])}
