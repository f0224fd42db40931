"""A memory graph as compact numpy arrays whose vertices and edges carry time, so one cached
graph answers questions asked "as of" any past time.

The graphs (undirected, HippoRAG-style; vertex names in :mod:`worldmm.graph.types`):

- episodic, one per scale: entity and literal vertices and one vertex per segment (HippoRAG's
  "passage"); a ``relation`` edge subject-object weighted by how many triples state it, and
  ``mention`` edges entity-segment for every triple's subject and entity object, weighted by
  how many of the segment's triples mention the entity. Literals hang off their subject only;
  a self-loop is dropped (it would only inflate its vertex's own PageRank);
- semantic: entity (and literal) vertices, one ``relation`` edge per triple, whose ``src``
  is the triple's subject (an undirected edge does not keep its direction otherwise).

Edges are kept as *units*: one per (vertex pair, edge kind, time). An episodic relation
stated in segments of three different times is three units of weight 1 instead of one edge
of weight 3, so the graph seen at time ``T`` (the units with ``t_from <= T``) has exactly the
weights a graph built from the rows visible at ``T`` has. Semantic units are one per triple
and also carry the time the triple was soft-deleted (``t_to``).

Visibility mirrors :func:`worldmm.store.triples._as_of_clause` (the SQL) exactly:

- episodic: a row exists at ``T`` when ``valid_from <= T`` (its segment's window end);
  without ``as_of`` every row exists;
- semantic: active at ``T`` when ``valid_from <= T < invalidated_at`` (``invalidated_at``
  NULL = never); without ``as_of`` active means never invalidated.

A vertex exists at ``T`` when a row visible at ``T`` created it (episodic: its earliest
row's time, ``v_from``; semantic: any visible incident unit, since rows can also vanish).

Adjacency is CSR over the units (both directions; an undirected self-loop twice, as igraph
counts it) for the units present when it was sealed, plus an unsorted *tail* of units added
since; the tail is folded in once it outgrows ``seal_every`` units, so a new 30 s segment
costs an append and a sort of the tail, not a re-sort of the week (see :func:`extend`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import igraph as ig
import numpy as np

from worldmm.graph.types import (
    GraphMemoryType,
    GraphTriple,
    entity_node,
    literal_node,
    segment_node,
)

NEVER = np.iinfo(np.int64).max  # a time no as_of reaches (never invalidated / no valid_from)
KINDS = ("entity", "literal", "segment")  # vertex kind codes
ENTITY, LITERAL, SEGMENT = 0, 1, 2
RELATION, MENTION = 0, 1
DEFAULT_SEAL_EVERY = 20_000  # tail units before the CSR is rebuilt (about a day of 30 s rows)


def to_micros(value: datetime | None) -> int:
    """Event time as integer microseconds since the epoch; None is NEVER."""
    if value is None:
        return int(NEVER)
    return int(value.timestamp() * 1_000_000)


def micros_to_datetime(value: int) -> datetime | None:
    """:func:`to_micros` back to an aware datetime (UTC); NEVER is None."""
    if value == NEVER:
        return None
    return datetime.fromtimestamp(value / 1_000_000, tz=UTC)


@dataclass
class Csr:
    indptr: np.ndarray  # (n + 1,) int64
    unit: np.ndarray  # unit index per entry, int64 (the neighbour is its other end)


@dataclass
class TimedGraph:
    memory_type: GraphMemoryType
    names: list[str]
    kind: np.ndarray  # int8 per vertex (KINDS)
    label: list[str]
    segment_id: np.ndarray  # int64 per vertex, -1 for non-segments
    v_from: np.ndarray  # int64 per vertex: earliest time of a row that created it
    src: np.ndarray  # int32 per unit (semantic: the triple's subject vertex)
    dst: np.ndarray  # int32 per unit
    ukind: np.ndarray  # int8 per unit (EDGE_KINDS)
    weight: np.ndarray  # float64 per unit
    t_from: np.ndarray  # int64 per unit
    t_to: np.ndarray  # int64 per unit (NEVER unless soft-deleted)
    triple_id: np.ndarray  # int64 per unit (semantic), -1 for episodic
    predicate: list[str]  # per unit (semantic), empty for episodic
    fingerprint: str | None = None
    seal_every: int = DEFAULT_SEAL_EVERY
    position: dict[str, int] = field(default_factory=dict)
    csr: Csr | None = None
    sealed: int = 0  # units covered by ``csr``; the rest are the tail
    _deg_now: np.ndarray | None = field(default=None, repr=False)
    _segments: np.ndarray | None = field(default=None, repr=False)
    _tail: Csr | None = field(default=None, repr=False)
    _igraph_now: ig.Graph | None = field(default=None, repr=False)
    _keys: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.position:
            self.position = {name: i for i, name in enumerate(self.names)}
        if self.csr is None:
            self.seal()

    # --- shape ----------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def units(self) -> int:
        return len(self.src)

    @property
    def size(self) -> int:
        """Vertices + units: what the process memo budgets."""
        return self.n + self.units

    def seal(self) -> None:
        """(Re)build the CSR over every unit; the tail becomes empty."""
        self.csr = build_csr(self.n, self.src, self.dst, self.t_from)
        self.sealed = self.units
        self._tail = None
        self._keys = None

    # --- visibility -----------------------------------------------------------------------
    def unit_visible(self, units: np.ndarray, as_of: int | None) -> np.ndarray:
        """Which of ``units`` exist at ``as_of`` (microseconds; None = now)."""
        if self.memory_type == "episodic":
            if as_of is None:
                return np.ones(len(units), dtype=bool)
            return self.t_from[units] <= as_of
        if as_of is None:
            return self.t_to[units] == NEVER
        return (self.t_from[units] <= as_of) & (self.t_to[units] > as_of)

    def all_units_visible(self, as_of: int | None) -> np.ndarray:
        return self.unit_visible(np.arange(self.units), as_of)

    def visible_vertices(self, as_of: int | None) -> np.ndarray:
        """Boolean mask over all vertices (O(graph): for exact runs and tests)."""
        if self.memory_type == "episodic":
            if as_of is None:
                return np.ones(self.n, dtype=bool)
            return self.v_from <= as_of
        seen = np.zeros(self.n, dtype=bool)
        vis = self.all_units_visible(as_of)
        seen[self.src[vis]] = True
        seen[self.dst[vis]] = True
        return seen

    def vertex_visible(self, v: int, as_of: int | None) -> bool:
        """One vertex, reading only its own adjacency."""
        if self.memory_type == "episodic":
            return as_of is None or bool(self.v_from[v] <= as_of)
        _, units = self.gather(np.array([v], dtype=np.int64))
        return bool(self.unit_visible(units, as_of).any())

    def degrees_now(self) -> np.ndarray:
        """Weighted degree of every vertex over the units visible now (computed once per
        graph object; an undirected self-loop counts twice, as in igraph)."""
        if self._deg_now is None:
            vis = self.all_units_visible(None)
            w = self.weight[vis]
            deg = np.bincount(self.src[vis], w, minlength=self.n)
            deg += np.bincount(self.dst[vis], w, minlength=self.n)
            self._deg_now = deg
        return self._deg_now

    def segment_vertices(self) -> np.ndarray:
        """Segment vertex indices in vertex order (computed once per graph object)."""
        if self._segments is None:
            self._segments = np.flatnonzero(self.kind == SEGMENT)
        return self._segments

    def igraph(self) -> ig.Graph:
        """Every unit as an igraph edge with its ``weight``, edge ``i`` unit ``i``, built on
        each call (tests, inspection, the bench's per-fact baseline: PageRank runs on
        :meth:`igraph_visible`)."""
        g = ig.Graph(n=self.n, directed=False)
        g.add_edges(np.column_stack([self.src, self.dst]))
        g.es["weight"] = self.weight.tolist()
        return g

    def igraph_visible(self, as_of: int | None) -> ig.Graph:
        """The units visible at ``as_of`` as one weighted edge per vertex pair, for exact
        PRPACK; the graph of now is built once per graph object.

        Units of one pair are summed into one edge: PageRank on an undirected graph sees only
        each pair's total weight, so the scores are those of the units as edges, while the
        build and each solve walk a fraction of the edges (a twelve-week semantic graph:
        36k triples on 14k pairs)."""
        if as_of is not None:
            return self._collapsed(self.all_units_visible(as_of))
        if self._igraph_now is None:
            self._igraph_now = self._collapsed(self.all_units_visible(None))
        return self._igraph_now

    def _collapsed(self, visible: np.ndarray) -> ig.Graph:
        src, dst = self.src[visible].astype(np.int64), self.dst[visible].astype(np.int64)
        pair = np.minimum(src, dst) * self.n + np.maximum(src, dst)
        pairs, which = np.unique(pair, return_inverse=True)
        weight = np.bincount(which, self.weight[visible], minlength=len(pairs))
        g = ig.Graph(n=self.n, directed=False)
        g.add_edges(np.column_stack([pairs // self.n, pairs % self.n]))
        g.es["weight"] = weight.tolist()
        return g

    # --- adjacency ------------------------------------------------------------------------
    def gather(self, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every adjacency entry of ``vertices`` as (row position in ``vertices``, unit).
        The neighbour of entry (i, u) is the unit's other end: see :meth:`neighbours`."""
        assert self.csr is not None
        rows, units = _gather(self.csr, vertices)
        if self.sealed < self.units:  # the tail has its own small CSR, built once per graph
            t_rows, t_units = self._tail_gather(vertices)
            rows = np.concatenate([rows, t_rows])
            units = np.concatenate([units, t_units])
        return rows, units

    def gather_visible(
        self, vertices: np.ndarray, as_of: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`gather` restricted to the units that exist at ``as_of``. Episodic rows of
        the CSR are sorted by time, so a past time reads only the prefix of each row (a hub
        seen in every segment of the week costs what it had then, not what it has now)."""
        if self.memory_type != "episodic" or as_of is None:
            rows, units = self.gather(vertices)
            if self.memory_type == "episodic":
                return rows, units
            keep = self.unit_visible(units, as_of)
            return rows[keep], units[keep]
        assert self.csr is not None
        keys, times = self._time_keys()
        upto = int(np.searchsorted(times, as_of, side="right"))  # ranks 1..upto are visible
        stride = len(times) + 1
        ends = np.searchsorted(keys, vertices * stride + upto, side="right")
        rows, units = _gather(self.csr, vertices, ends)
        if self.sealed < self.units:
            t_rows, t_units = self._tail_gather(vertices)
            keep = self.t_from[t_units] <= as_of
            rows = np.concatenate([rows, t_rows[keep]])
            units = np.concatenate([units, t_units[keep]])
        return rows, units

    def _tail_gather(self, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._tail is None:
            self._tail = build_csr(self.n, self.src[self.sealed :], self.dst[self.sealed :])
        rows, units = _gather(self._tail, vertices)
        return rows, units + self.sealed

    def _time_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Per CSR entry ``row * (R + 1) + rank of its time`` (sorted, R distinct times), and
        the distinct times: one binary search finds where a row's visible prefix ends."""
        if self._keys is None:
            assert self.csr is not None
            etime = self.t_from[self.csr.unit]
            times = np.unique(etime)
            rank = np.searchsorted(times, etime) + 1
            row = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.csr.indptr))
            self._keys = (row * (len(times) + 1) + rank, times)
        return self._keys

    def neighbours(self, vertices: np.ndarray, rows: np.ndarray, units: np.ndarray) -> np.ndarray:
        """The far end of each gathered entry (a self-loop's far end is itself)."""
        own = vertices[rows]
        src = self.src[units]
        return np.where(src == own, self.dst[units], src)


def _gather(
    csr: Csr, vertices: np.ndarray, ends: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Entries ``indptr[v]`` up to ``ends`` (default: the whole row) of each vertex."""
    starts = csr.indptr[vertices]
    lens = (csr.indptr[vertices + 1] if ends is None else ends) - starts
    total = int(lens.sum())
    rows = np.repeat(np.arange(len(vertices)), lens)
    if not total:
        return rows, np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total)
    return rows, csr.unit[offsets]


def build_csr(n: int, src: np.ndarray, dst: np.ndarray, t_from: np.ndarray | None = None) -> Csr:
    """Both directions of every unit, grouped by vertex; within a row by ``t_from`` when
    given, else in unit order."""
    ids = np.arange(len(src), dtype=np.int64)
    rows = np.concatenate([src, dst]).astype(np.int64)
    unit = np.concatenate([ids, ids])
    if t_from is None:
        order = np.argsort(rows, kind="stable")
    else:
        order = np.lexsort((np.concatenate([t_from, t_from]), rows))
    counts = np.bincount(rows, minlength=n) if n else np.zeros(0, dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Csr(indptr=indptr, unit=unit[order])


class _Builder:
    """Vertices and units collected from rows, appended after an existing graph's."""

    def __init__(self, memory_type: GraphMemoryType, base: TimedGraph | None = None) -> None:
        self.memory_type = memory_type
        self.base = base
        self.base_n = base.n if base is not None else 0
        self.position = base.position if base is not None else {}
        self.new_index: dict[str, int] = {}
        self.kind: list[int] = []
        self.label: list[str] = []
        self.segment_id: list[int] = []
        self.v_from: dict[int, int] = {}  # vertex -> earliest time (new or lowered)
        self.units: dict[tuple[int, int, int, int], float] = {}  # episodic: summed weights
        self.rows: list[tuple[int, int, int, int, int, str]] = []  # semantic: one per triple

    def vertex(self, name: str, kind: int, label: str, t: int, segment_id: int = -1) -> int:
        i = self.position.get(name)
        if i is None:
            i = self.new_index.get(name)
        if i is None:
            i = self.base_n + len(self.kind)
            self.new_index[name] = i
            self.kind.append(kind)
            self.label.append(label)
            self.segment_id.append(segment_id)
        known = self.v_from.get(i)
        if known is None and i < self.base_n:
            assert self.base is not None
            known = int(self.base.v_from[i])
        if known is None or t < known:
            self.v_from[i] = t
        return i

    def add(self, t: GraphTriple) -> None:
        when = to_micros(t.valid_from)
        subj = self.vertex(entity_node(t.subject), ENTITY, t.subject, when)
        if t.object_is_literal:
            obj = self.vertex(literal_node(t.subject, t.object), LITERAL, t.object, when)
        else:
            obj = self.vertex(entity_node(t.object), ENTITY, t.object, when)
        if self.memory_type == "semantic":
            self.rows.append(
                (subj, obj, when, to_micros(t.invalidated_at), t.triple_id, t.predicate)
            )
            return
        self._bump(subj, obj, RELATION, when)
        if t.segment_id is None:
            return
        seg = self.vertex(
            segment_node(t.segment_id), SEGMENT, str(t.segment_id), when, t.segment_id
        )
        self._bump(subj, seg, MENTION, when)
        if not t.object_is_literal:
            self._bump(obj, seg, MENTION, when)

    def _bump(self, a: int, b: int, kind: int, when: int) -> None:
        if a != b:  # a self-loop only inflates the vertex's own PageRank
            key = (min(a, b), max(a, b), kind, when)
            self.units[key] = self.units.get(key, 0.0) + 1.0

    def unit_arrays(self) -> dict[str, np.ndarray | list[str]]:
        if self.memory_type == "semantic":
            rows = self.rows
            return {
                "src": np.array([r[0] for r in rows], dtype=np.int32),
                "dst": np.array([r[1] for r in rows], dtype=np.int32),
                "ukind": np.full(len(rows), RELATION, dtype=np.int8),
                "weight": np.ones(len(rows), dtype=np.float64),
                "t_from": np.array([r[2] for r in rows], dtype=np.int64),
                "t_to": np.array([r[3] for r in rows], dtype=np.int64),
                "triple_id": np.array([r[4] for r in rows], dtype=np.int64),
                "predicate": [r[5] for r in rows],
            }
        keys = list(self.units)
        return {
            "src": np.array([k[0] for k in keys], dtype=np.int32),
            "dst": np.array([k[1] for k in keys], dtype=np.int32),
            "ukind": np.array([k[2] for k in keys], dtype=np.int8),
            "weight": np.fromiter(self.units.values(), dtype=np.float64, count=len(keys)),
            "t_from": np.array([k[3] for k in keys], dtype=np.int64),
            "t_to": np.full(len(keys), NEVER, dtype=np.int64),
            "triple_id": np.full(len(keys), -1, dtype=np.int64),
            "predicate": [],
        }


def build_timed(
    memory_type: GraphMemoryType,
    rows: Iterable[GraphTriple],
    seal_every: int = DEFAULT_SEAL_EVERY,
) -> TimedGraph:
    """The whole history of one graph: every row, soft-deleted semantic ones included (each
    carries its times; queries hide what is not visible)."""
    if memory_type not in ("episodic", "semantic"):
        raise ValueError(f"no graph for memory type {memory_type!r}; expected episodic or semantic")
    b = _Builder(memory_type)
    for row in rows:
        b.add(row)
    v_from = np.array([b.v_from[i] for i in range(len(b.kind))], dtype=np.int64)
    return TimedGraph(
        memory_type=memory_type,
        names=list(b.new_index),
        kind=np.array(b.kind, dtype=np.int8),
        label=b.label,
        segment_id=np.array(b.segment_id, dtype=np.int64),
        v_from=v_from,
        seal_every=seal_every,
        **b.unit_arrays(),  # type: ignore[arg-type]
    )


def extend(graph: TimedGraph, rows: Iterable[GraphTriple]) -> TimedGraph:
    """A new graph: ``graph`` plus ``rows`` (appended since it was built). ``graph`` is not
    modified (other queries may be reading it); the new units join the tail, and the CSR is
    rebuilt only when the tail outgrows ``seal_every``."""
    b = _Builder(graph.memory_type, graph)
    for row in rows:
        b.add(row)
    new = b.unit_arrays()
    v_from = graph.v_from.copy()
    grown = np.array(
        [b.v_from.get(i, 0) for i in range(graph.n, graph.n + len(b.kind))], dtype=np.int64
    )
    v_from = np.concatenate([v_from, grown])
    for i, t in b.v_from.items():
        if i < graph.n:
            v_from[i] = t
    position = dict(graph.position)
    position.update(b.new_index)
    out = TimedGraph(
        memory_type=graph.memory_type,
        names=graph.names + list(b.new_index),
        kind=np.concatenate([graph.kind, np.array(b.kind, dtype=np.int8)]),
        label=graph.label + b.label,
        segment_id=np.concatenate([graph.segment_id, np.array(b.segment_id, dtype=np.int64)]),
        v_from=v_from,
        src=np.concatenate([graph.src, new["src"]]),  # type: ignore[list-item]
        dst=np.concatenate([graph.dst, new["dst"]]),  # type: ignore[list-item]
        ukind=np.concatenate([graph.ukind, new["ukind"]]),  # type: ignore[list-item]
        weight=np.concatenate([graph.weight, new["weight"]]),  # type: ignore[list-item]
        t_from=np.concatenate([graph.t_from, new["t_from"]]),  # type: ignore[list-item]
        t_to=np.concatenate([graph.t_to, new["t_to"]]),  # type: ignore[list-item]
        triple_id=np.concatenate([graph.triple_id, new["triple_id"]]),  # type: ignore[list-item]
        predicate=graph.predicate + list(new["predicate"]),  # type: ignore[arg-type]
        seal_every=graph.seal_every,
        position=position,
        csr=_grown_csr(graph, len(b.kind)),
        sealed=graph.sealed,
    )
    if out.units - out.sealed > out.seal_every:
        out.seal()
    _carry_caches(graph, out)
    return out


def _carry_caches(base: TimedGraph, grown: TimedGraph) -> None:
    """Update the base's per-graph arrays for the units appended, instead of recomputing
    them over the whole graph on the grown graph's first query (O(new), not O(graph))."""
    added = np.arange(base.units, grown.units)
    if base._deg_now is not None:
        deg = np.concatenate([base._deg_now, np.zeros(grown.n - base.n)])
        vis = added[grown.unit_visible(added, None)]
        w = grown.weight[vis]
        deg += np.bincount(grown.src[vis], w, minlength=grown.n)
        deg += np.bincount(grown.dst[vis], w, minlength=grown.n)
        grown._deg_now = deg
    if base._segments is not None:
        new = np.arange(base.n, grown.n)
        grown._segments = np.concatenate([base._segments, new[grown.kind[new] == SEGMENT]])


def _grown_csr(graph: TimedGraph, added_vertices: int) -> Csr:
    """The sealed CSR with empty rows for vertices added since (they live in the tail)."""
    assert graph.csr is not None
    if not added_vertices:
        return graph.csr
    last = graph.csr.indptr[-1]
    indptr = np.concatenate([graph.csr.indptr, np.full(added_vertices, last, dtype=np.int64)])
    return Csr(indptr=indptr, unit=graph.csr.unit)
