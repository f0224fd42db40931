"""Build the memory graphs (python-igraph, undirected) from triple rows.

Episodic graph (one per scale, HippoRAG-style): entity and literal vertices, one vertex per
segment ("passage"); a ``relation`` edge subject–object weighted by how many triples state it,
and ``mention`` edges entity–segment for every triple's subject and entity object, weighted
by how many of the segment's triples mention the entity. Literals hang off their subject only.

Semantic graph: entity (and literal) vertices with one ``relation`` edge per active triple,
carrying ``triple_id``, ``predicate``, ``subject`` (the subject's vertex index: undirected
edges do not keep their direction) and ``valid_from`` (ISO text) so an edge can be returned as
a fact without going back to the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

import igraph as ig

from worldmm.graph.index import INDEX_ATTR, graph_index
from worldmm.graph.types import (
    GraphTripleLike,
    NodeKind,
    entity_node,
    literal_node,
    segment_node,
)


class _Vertices:
    """Collects vertices in insertion order with their attributes."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.kind: list[NodeKind] = []
        self.label: list[str] = []
        self.segment_id: list[int | None] = []

    def add(self, name: str, kind: NodeKind, label: str, segment_id: int | None = None) -> int:
        found = self.index.get(name)
        if found is not None:
            return found
        self.index[name] = len(self.kind)
        self.kind.append(kind)
        self.label.append(label)
        self.segment_id.append(segment_id)
        return self.index[name]

    def graph(self) -> ig.Graph:
        g = ig.Graph(n=len(self.kind), directed=False)
        g.vs["name"] = list(self.index)
        g.vs["kind"] = self.kind
        g.vs["label"] = self.label
        g.vs["segment_id"] = self.segment_id
        return g


AddVertex = Callable[..., int]  # (name, kind, label, segment_id=None) -> vertex index
Link = Callable[[int, int, str], None]  # (lower index, higher index, edge kind)

# Edge attributes only semantic edges fill; episodic edges carry them as None so both kinds
# of graph have the same columns (the cache format and the scorers rely on it).
_SEMANTIC_ONLY = ("triple_id", "predicate", "subject", "valid_from")


def _object_vertex(add: AddVertex, t: GraphTripleLike) -> int:
    if t.object_is_literal:
        return add(literal_node(t.subject, t.object), "literal", t.object)
    return add(entity_node(t.object), "entity", t.object)


def _walk_episodic(triples: Iterable[GraphTripleLike], add: AddVertex, link: Link) -> None:
    """Each triple's vertices (subject, object, segment, in that order) and edges: the
    relation subject-object, and a mention from each entity to the segment."""

    def bump(a: int, b: int, kind: str) -> None:
        if a != b:  # a self-loop only inflates the vertex's own PageRank
            link(min(a, b), max(a, b), kind)

    for t in triples:
        subj = add(entity_node(t.subject), "entity", t.subject)
        obj = _object_vertex(add, t)
        bump(subj, obj, "relation")
        if t.segment_id is None:
            continue
        seg = add(segment_node(t.segment_id), "segment", str(t.segment_id), t.segment_id)
        bump(subj, seg, "mention")
        if not t.object_is_literal:
            bump(obj, seg, "mention")


def _episodic_edge_attrs(weights: dict[tuple[int, int, str], float]) -> dict[str, list]:
    empty = [None] * len(weights)
    attrs: dict[str, list] = {"weight": list(weights.values()), "kind": [k[2] for k in weights]}
    return attrs | {attr: empty for attr in _SEMANTIC_ONLY}


def build_episodic_graph(triples: Iterable[GraphTripleLike]) -> ig.Graph:
    """Entity + segment graph of one scale's episodic triples."""
    vertices = _Vertices()
    weights: dict[tuple[int, int, str], float] = {}

    def link(a: int, b: int, kind: str) -> None:
        weights[(a, b, kind)] = weights.get((a, b, kind), 0.0) + 1.0

    _walk_episodic(triples, vertices.add, link)
    g = vertices.graph()
    g.add_edges([(a, b) for a, b, _ in weights])
    for attr, values in _episodic_edge_attrs(weights).items():
        g.es[attr] = values
    return g


def extend_episodic_graph(graph: ig.Graph, triples: Iterable[GraphTripleLike]) -> ig.Graph:
    """A new graph: ``graph`` plus ``triples`` (rows with higher ids than any it was built
    from), equal to :func:`build_episodic_graph` over all the rows, vertex and edge order
    included. ``graph`` is not modified (other queries may be reading it).

    A live session adds a 30 s segment's triples every 30 s; rebuilding a week's 30 s graph
    for each took seconds, extending it takes milliseconds plus one copy."""
    g = graph.copy()
    if INDEX_ATTR in g.attributes():
        del g[INDEX_ATTR]  # the structure changes: the copy gets its own index when used
    position = graph_index(graph).position
    new = _Vertices()
    base = graph.vcount()

    def add(name: str, kind: NodeKind, label: str, segment_id: int | None = None) -> int:
        found = position.get(name)
        return found if found is not None else base + new.add(name, kind, label, segment_id)

    bumps: dict[int, float] = {}  # existing edge id -> added weight
    added: dict[tuple[int, int, str], float] = {}

    def link(a: int, b: int, kind: str) -> None:
        # Relation edges join entities/literals and mention edges an entity and a segment,
        # so two vertices share at most one edge, of one kind.
        eid = g.get_eid(a, b, directed=False, error=False) if b < base else -1
        if eid >= 0:
            bumps[eid] = bumps.get(eid, 0.0) + 1.0
        else:
            added[(a, b, kind)] = added.get((a, b, kind), 0.0) + 1.0

    _walk_episodic(triples, add, link)
    if new.kind:
        g.add_vertices(
            len(new.kind),
            attributes={
                "name": list(new.index),
                "kind": new.kind,
                "label": new.label,
                "segment_id": new.segment_id,
            },
        )
    for eid, extra in bumps.items():
        g.es[eid]["weight"] += extra
    if added:
        g.add_edges([(a, b) for a, b, _ in added], attributes=_episodic_edge_attrs(added))
    return g


def is_active(t: GraphTripleLike, as_of: datetime | None = None) -> bool:
    """Not soft-deleted — at ``as_of`` when given (a later removal did not exist yet)."""
    if t.invalidated_at is None:
        return True
    return as_of is not None and t.invalidated_at > as_of


def build_semantic_graph(
    triples: Iterable[GraphTripleLike], as_of: datetime | None = None
) -> ig.Graph:
    """Entity graph with one edge per semantic triple active (at ``as_of``)."""
    vertices = _Vertices()
    edges: list[tuple[int, int]] = []
    cols: dict[str, list] = {"triple_id": [], "predicate": [], "subject": [], "valid_from": []}
    for t in triples:
        if not is_active(t, as_of):
            continue
        subj = vertices.add(entity_node(t.subject), "entity", t.subject)
        obj = _object_vertex(vertices.add, t)
        edges.append((subj, obj))
        cols["triple_id"].append(t.triple_id)
        cols["predicate"].append(t.predicate)
        cols["subject"].append(subj)
        cols["valid_from"].append(t.valid_from.isoformat() if t.valid_from else None)

    g = vertices.graph()
    g.add_edges(edges)
    g.es["weight"] = [1.0] * len(edges)
    g.es["kind"] = ["relation"] * len(edges)
    for attr, values in cols.items():
        g.es[attr] = values
    return g


def build_graph(
    memory_type: str, triples: Iterable[GraphTripleLike], as_of: datetime | None = None
) -> ig.Graph:
    """Dispatch on memory type ('episodic' or 'semantic')."""
    if memory_type == "episodic":
        return build_episodic_graph(triples)
    if memory_type == "semantic":
        return build_semantic_graph(triples, as_of)
    raise ValueError(f"no graph for memory type {memory_type!r}; expected episodic or semantic")
