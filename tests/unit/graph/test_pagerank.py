"""Graph building, PPR seeding and scoring on hand-built graphs with known rankings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from worldmm.graph.cache import dumps_timed, loads_timed
from worldmm.graph.pagerank import (
    PprScores,
    fact_seed_scores,
    ppr,
    seed_vertices,
    segment_spread,
)
from worldmm.graph.timed import (
    KINDS,
    MENTION,
    RELATION,
    TimedGraph,
    build_timed,
    to_micros,
)
from worldmm.graph.types import GraphTriple, entity_node, literal_node, segment_node
from worldmm.memory.retrieval.graph_lanes import top_segments
from worldmm.memory.retrieval.semantic import top_triple_units

SINCE = datetime(2025, 1, 1, tzinfo=UTC)


def t(tid, s, p, o, seg=None, literal=False, **kw) -> GraphTriple:
    kw.setdefault("valid_from", SINCE)
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


def episodic(rows) -> TimedGraph:
    return build_timed("episodic", rows)


def semantic(rows) -> TimedGraph:
    return build_timed("semantic", rows)


def vid(g: TimedGraph, name: str) -> int:
    return g.position[name]


def kind_of(g: TimedGraph, name: str) -> str:
    return KINDS[g.kind[vid(g, name)]]


def weight(g: TimedGraph, a: int, b: int, kind: int) -> float:
    """The edge a-b of that kind: the summed weight of its units."""
    pair = ((g.src == a) & (g.dst == b)) | ((g.src == b) & (g.dst == a))
    return float(g.weight[pair & (g.ukind == kind)].sum())


def neighbours(g: TimedGraph, v: int) -> set[int]:
    vertices = np.array([v], dtype=np.int64)
    rows, units = g.gather(vertices)
    return set(g.neighbours(vertices, rows, units).tolist())


def solve(g: TimedGraph, names, dense=None, method="prpack") -> PprScores:
    return ppr(g, seed_vertices(g, names, None, dense), None, 0.85, method, 1e-12)


def dense_scores(g: TimedGraph, result: PprScores) -> np.ndarray:
    out = np.zeros(g.n)
    out[result.vertices] = result.scores
    return out


def top_triples(g: TimedGraph, result: PprScores, k: int) -> list[tuple[int, float]]:
    return [(int(g.triple_id[u]), s) for u, s in top_triple_units(g, result, None, k)]


# --- building --------------------------------------------------------------------------
def test_episodic_graph_has_entities_segments_and_weighted_edges():
    g = episodic(
        [
            t(1, "Kate", "holds", "Cup", seg=10),
            t(2, "kate", "drinks from", "cup", seg=10),  # same pair, other case: one edge, weight 2
            t(3, "Kate", "meets", "Alex", seg=11),
            t(4, "Meeting", "starts at", "2:30 PM", seg=11, literal=True),
        ]
    )
    assert kind_of(g, entity_node("Kate")) == "entity"
    assert kind_of(g, literal_node("Meeting", "2:30 PM")) == "literal"
    assert kind_of(g, segment_node(10)) == "segment"
    assert g.segment_id[vid(g, segment_node(11))] == 11
    assert g.segment_id[vid(g, entity_node("Kate"))] == -1

    kate, cup = vid(g, entity_node("kate")), vid(g, entity_node("CUP"))
    assert weight(g, kate, cup, RELATION) == 2.0
    # Kate is mentioned by two triples of segment 10: one mention edge of weight 2.
    assert weight(g, kate, vid(g, segment_node(10)), MENTION) == 2.0
    # The literal is a leaf of its subject only (no segment edge).
    lit = vid(g, literal_node("Meeting", "2:30 PM"))
    assert neighbours(g, lit) == {vid(g, entity_node("Meeting"))}
    # Meeting itself still points at its segment.
    assert vid(g, segment_node(11)) in neighbours(g, vid(g, entity_node("Meeting")))


def test_same_literal_under_two_subjects_stays_two_leaves():
    g = episodic(
        [
            t(1, "Lunch", "starts at", "12:00", seg=1, literal=True),
            t(2, "Call", "starts at", "12:00", seg=1, literal=True),
        ]
    )
    assert [KINDS[k] for k in g.kind].count("literal") == 2
    lunch, call = vid(g, entity_node("Lunch")), vid(g, entity_node("Call"))
    assert g.igraph().distances(lunch, call)[0][0] == 2  # only via the segment, not via "12:00"


def test_semantic_graph_one_edge_per_active_triple():
    now = datetime(2025, 1, 1, tzinfo=UTC)
    before = now - timedelta(days=2)
    g = semantic(
        [
            t(1, "I", "likes", "coffee", valid_from=before),
            t(2, "I", "drinks", "coffee", valid_from=before),
            t(3, "I", "dislikes", "coffee", valid_from=before, invalidated_at=now),
        ]
    )
    active = np.flatnonzero(g.all_units_visible(None))
    assert int(g.visible_vertices(None).sum()) == 2
    assert sorted(g.triple_id[active].tolist()) == [1, 2]
    assert {g.predicate[u] for u in active} == {"likes", "drinks"}
    # as of a time before the removal, the removed fact was still active
    earlier = np.flatnonzero(g.all_units_visible(to_micros(now - timedelta(days=1))))
    assert sorted(g.triple_id[earlier].tolist()) == [1, 2, 3]


def test_semantic_edge_remembers_subject_direction_and_valid_from():
    since = datetime(2025, 3, 1, 12, tzinfo=UTC)
    # "z" is added first as an object, so it has a lower index than the subject "a"
    g = semantic([t(1, "x", "r", "z"), t(2, "a", "likes", "z", valid_from=since)])
    (unit,) = np.flatnonzero(g.triple_id == 2)
    assert g.label[g.src[unit]] == "a"
    assert g.t_from[unit] == to_micros(since)
    assert loads_timed(dumps_timed(g)).src[unit] == g.src[unit]


def test_build_rejects_visual():
    with pytest.raises(ValueError, match="visual"):
        build_timed("visual", [])  # type: ignore[arg-type]


# --- PPR ---------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["prpack", "push"])
def test_chain_seed_neighbour_ranks_first(method):
    # a - b - c - d chained by triples; seeding the end vertex a, its neighbour b collects the
    # most mass (a gives everything to b, b splits between a and c).
    g = semantic([t(1, "a", "r", "b"), t(2, "b", "r", "c"), t(3, "c", "r", "d")])
    res = solve(g, {entity_node("a"): 1.0}, method=method)
    assert not res.fallback
    scores = dense_scores(g, res)
    order = [g.names[i] for i in np.argsort(-scores)]
    assert order == [entity_node(x) for x in "bacd"]
    assert scores.sum() == pytest.approx(1.0, abs=1e-9)


def test_star_leaf_seed_feeds_hub_then_itself_then_other_leaves():
    g = semantic([t(i, "hub", "r", f"leaf{i}") for i in range(5)])
    scores = dense_scores(g, solve(g, {entity_node("leaf0"): 1.0}))
    hub, leaf0 = vid(g, entity_node("hub")), vid(g, entity_node("leaf0"))
    others = [vid(g, entity_node(f"leaf{i}")) for i in range(1, 5)]
    # the seeded leaf's only neighbour (the hub) ranks first, then the seed, then the rest
    assert scores[hub] > scores[leaf0] > max(scores[o] for o in others)
    assert np.allclose([scores[o] for o in others], scores[others[0]])


def test_episodic_seed_ranks_segment_of_that_entity_first():
    g = episodic(
        [
            t(1, "Kate", "holds", "Cup", seg=1),
            t(2, "Alex", "reads", "Book", seg=2),
            t(3, "Alex", "closes", "Door", seg=3),
        ]
    )
    assert top_segments(g, solve(g, {entity_node("Book"): 1.0}), None, 3)[0][0] == 2
    res = solve(g, {entity_node("Kate"): 1.0})
    assert [s for s, _ in top_segments(g, res, None, 1)] == [1]


def test_seed_weight_divided_by_segments_holding_the_entity():
    g = episodic([t(1, "I", "walk", "Street", seg=1), t(2, "I", "eat", "Apple", seg=2),
                  t(3, "I", "see", "Dog", seg=3), t(4, "Kate", "pets", "Dog", seg=3)])  # fmt: skip
    assert segment_spread(g, vid(g, entity_node("I")), None) == 3
    assert segment_spread(g, vid(g, entity_node("Kate")), None) == 1
    assert segment_spread(g, vid(g, segment_node(1)), None) == 0
    reset = seed_vertices(
        g, {entity_node("I"): 0.9, entity_node("Kate"): 0.6, "e:unknown": 5.0}, None
    )
    assert reset[vid(g, entity_node("I"))] == pytest.approx(0.3)
    assert reset[vid(g, entity_node("Kate"))] == pytest.approx(0.6)
    assert sum(reset.values()) == pytest.approx(0.9)  # the unknown name is ignored


def test_dense_segment_scores_add_a_small_normalised_weight():
    g = episodic([t(1, "a", "r", "b", seg=1), t(2, "c", "r", "d", seg=2)])
    reset = seed_vertices(g, {}, None, {1: 0.8, 2: 0.4, 99: 1.0}, segment_weight=0.05)
    # normalised by the best score (99's 1.0 counts even though it is not in the graph)
    assert reset[vid(g, segment_node(1))] == pytest.approx(0.04)
    assert reset[vid(g, segment_node(2))] == pytest.approx(0.02)
    res = ppr(g, reset, None, 0.85, "prpack")
    assert not res.fallback
    assert [s for s, _ in top_segments(g, res, None, 2)] == [1, 2]


def test_no_seed_falls_back_to_uniform_segment_reset():
    g = episodic([t(1, "a", "r", "b", seg=1), t(2, "a", "r", "c", seg=2),
                  t(3, "d", "r", "e", seg=2), t(4, "f", "r", "g", seg=2)])  # fmt: skip
    res = solve(g, {"e:nothing": 1.0}, method="push")
    assert res.fallback
    assert res.scores.sum() == pytest.approx(1.0)
    # the busier segment is more central
    assert [s for s, _ in top_segments(g, res, None, 2)] == [2, 1]


def test_fallback_without_segments_is_uniform_over_all_vertices():
    g = semantic([t(1, "a", "r", "b"), t(2, "b", "r", "c")])
    res = ppr(g, {}, None, 0.85)
    assert res.fallback and res.scores.sum() == pytest.approx(1.0)


def test_empty_graph_and_unknown_method():
    g = semantic([])
    res = ppr(g, {}, None, 0.85)
    assert res.scores.size == 0
    assert top_triple_units(g, res, None, 5) == []
    g = semantic([t(1, "a", "r", "b")])
    with pytest.raises(ValueError, match="method"):
        ppr(g, {0: 1.0}, None, 0.85, "power")  # type: ignore[arg-type]


# --- scoring -----------------------------------------------------------------------------
def test_edge_score_is_sum_of_endpoint_scores_and_top_k_orders_them():
    g = semantic([t(10, "a", "r", "b"), t(11, "b", "r", "c"),
                  t(12, "c", "r", "d"), t(13, "x", "r", "y")])  # fmt: skip
    scores = np.zeros(g.n)
    for name, value in {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.05, "x": 0.05}.items():
        scores[vid(g, entity_node(name))] = value
    every = PprScores(np.arange(g.n), scores, fallback=False)
    ranked = top_triples(g, every, 3)
    assert [tid for tid, _ in ranked] == [10, 11, 12]
    assert [s for _, s in ranked] == pytest.approx([0.7, 0.5, 0.25])
    assert len(top_triples(g, every, 100)) == 4


def test_semantic_ppr_from_fact_entities_ranks_adjacent_facts():
    g = semantic([t(1, "I", "likes", "coffee"), t(2, "coffee", "sold at", "Cafe Luna"),
                  t(3, "Kate", "plays", "tennis"),
                  t(4, "tennis", "played at", "Club")])  # fmt: skip
    res = solve(g, {entity_node("I"): 1.0, entity_node("coffee"): 1.0})
    assert [tid for tid, _ in top_triples(g, res, 2)] == [1, 2]


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


def test_top_segments_breaks_ties_in_vertex_order():
    g = episodic([t(i, "hub", "r", f"x{i}", seg=10 + i) for i in range(4)])
    scores = np.zeros(g.n)
    for i in range(4):  # all four segments tie
        scores[vid(g, segment_node(10 + i))] = 0.25
    every = PprScores(np.arange(g.n), scores, fallback=False)
    assert [s for s, _ in top_segments(g, every, None, 3)] == [10, 11, 12]
