"""Triples: episodic facts of a segment, and semantic facts kept consistent by consolidation.

Time is event time. An episodic triple exists at T when its segment does (valid_from is the
segment's window end). A semantic triple is active at T when valid_from <= T and it was not
invalidated at or before T. Without ``as_of``, "active" means not invalidated.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import tuple_row

from worldmm.models import TripleType
from worldmm.store._sql import as_vector, fetch_dicts, fetch_models, vec_cast
from worldmm.store.errors import NotFoundError
from worldmm.store.knn import knn_dicts
from worldmm.store.models import TripleRow, TripleWrite

_TRIPLE_SELECT = (
    "SELECT t.id, t.user_id, t.memory_type, t.segment_id, t.scale_seconds,"
    " t.subject_entity_id, COALESCE(s.canonical_name, s.surface_form) AS subject_name,"
    " t.predicate, t.object_entity_id, t.object_literal,"
    " COALESCE(o.canonical_name, o.surface_form, t.object_literal) AS object_name,"
    " t.valid_from, t.invalidated_at, t.replaced_by, t.evidence_segment_ids, t.origin,"
    " t.created_at"
)
# joined by wearer too: one shard group on Citus, and never another wearer's entity
_TRIPLE_JOINS = (
    " JOIN entities s ON s.user_id = t.user_id AND s.id = t.subject_entity_id"
    " LEFT JOIN entities o ON o.user_id = t.user_id AND o.id = t.object_entity_id"
)

# One statement for all the rows of a call (a window's triples: one round trip, and one run of
# the statement-level counter triggers, not one per triple). Rows naming the same fact are
# merged before (the first one's values, all their evidence); the ids come back in the order
# of the rows given, a repeated fact's for each of its rows. A plain INSERT ... SELECT from
# arrays: on Citus the coordinator reads them and sends the rows to the wearer's shard.
_INSERT = (
    "INSERT INTO triples AS t (user_id, memory_type, segment_id, scale_seconds,"
    " subject_entity_id, predicate, object_entity_id, object_literal, embedding, valid_from,"
    " evidence_segment_ids, origin)"
    " SELECT %(u)s, %(mt)s, %(seg)s, %(scale)s, f.subj, f.pred, f.obj, f.lit, f.emb, f.vf,"
    " f.ev::bigint[], f.origin"
    " FROM unnest(%(subj)s::bigint[], %(pred)s::text[], %(obj)s::bigint[], %(lit)s::text[],"
    " %(emb)s::{vec}[], %(vf)s::timestamptz[], %(ev)s::text[], %(origin)s::text[])"
    " AS f(subj, pred, obj, lit, emb, vf, ev, origin)"
    " ON CONFLICT ON CONSTRAINT triples_natural_key DO UPDATE SET"
    " embedding = EXCLUDED.embedding,"
    " evidence_segment_ids = ARRAY(SELECT DISTINCT x FROM"
    "   unnest(t.evidence_segment_ids || EXCLUDED.evidence_segment_ids) AS x ORDER BY x)"
    " RETURNING id, natural_key"
)
# The natural key of each row given, computed as the table's generated column computes it (the
# server's lower(), which need not be Python's), so rows naming one fact are merged before the
# insert and each row's id is found in what the insert returns.
_NATURAL_KEYS = (
    "SELECT md5(%(mt)s || '|' || coalesce(%(seg)s::text, '') || '|' || g.s::text || '|'"
    " || lower(g.p) || '|' || coalesce(g.o::text, '') || '|' || coalesce(lower(g.l), ''))"
    " FROM unnest(%(subj)s::bigint[], %(pred)s::text[], %(obj)s::bigint[], %(lit)s::text[])"
    " WITH ORDINALITY AS g(s, p, o, l, n) ORDER BY g.n"
)


_COLUMNS = ("subj", "pred", "obj", "lit", "emb", "vf", "ev", "origin")


def _memory_type(value: str) -> TripleType:
    # inlined into SQL (so the planner can use the per-type partial indexes): whitelist it
    if value not in ("episodic", "semantic"):
        raise ValueError(f"memory_type must be 'episodic' or 'semantic', got {value!r}")
    return value  # type: ignore[return-value]


def _canonical_ids(conn: psycopg.Connection, user_id: str, ids: set[int]) -> dict[int, int]:
    rows = conn.execute(
        "SELECT id, COALESCE(canonical_entity_id, id) FROM entities"
        " WHERE user_id = %s AND id = ANY(%s)",
        (user_id, sorted(ids)),
    ).fetchall()
    mapping = {int(a): int(b) for a, b in rows}
    missing = ids - mapping.keys()
    if missing:
        raise NotFoundError(f"no entities {sorted(missing)} for this user")
    return mapping


def insert_triples(
    conn: psycopg.Connection,
    user_id: str,
    segment_id: int | None,
    memory_type: TripleType,
    rows: Sequence[TripleWrite],
) -> list[int]:
    """Insert triples of one segment; return their ids in order. Idempotent: a triple with the
    same (segment, type, subject, predicate, object) returns the existing id and merges its
    evidence. Entity ids given for aliases are stored as their canonical entity.

    Episodic triples need a segment and take its window end as valid_from. Semantic triples
    default to it; without a segment (an explicit "remember this") valid_from is required.
    """
    memory_type = _memory_type(memory_type)
    if not rows:
        return []
    scale, window_end = None, None
    if segment_id is not None:
        seg = conn.execute(
            "SELECT scale_seconds, window_end FROM segments WHERE user_id = %s AND id = %s",
            (user_id, segment_id),
        ).fetchone()
        if seg is None:
            raise NotFoundError(f"no segment {segment_id} for this user")
        scale, window_end = seg
    elif memory_type == "episodic":
        raise ValueError("episodic triples need a segment")
    entity_ids = {r.subject_entity_id for r in rows} | {
        r.object_entity_id for r in rows if r.object_entity_id is not None
    }
    canonical = _canonical_ids(conn, user_id, entity_ids)
    given: list[dict[str, Any]] = []
    for r in rows:
        valid_from = window_end if memory_type == "episodic" else (r.valid_from or window_end)
        if valid_from is None:
            raise ValueError("a semantic triple without a segment needs valid_from")
        evidence = r.evidence_segment_ids or ([segment_id] if segment_id is not None else [])
        obj = r.object_entity_id
        given.append(
            {
                "subj": canonical[r.subject_entity_id], "pred": r.predicate.strip(),
                "obj": canonical[obj] if obj is not None else None, "lit": r.object_literal,
                "emb": as_vector(r.embedding), "vf": valid_from, "origin": r.origin,
                "ev": {int(e) for e in evidence},
            }
        )  # fmt: skip
    fixed = {"u": user_id, "mt": memory_type, "seg": segment_id, "scale": scale}
    keys = [
        str(k)
        for (k,) in conn.execute(
            _NATURAL_KEYS, {**fixed, **{c: [g[c] for g in given] for c in _COLUMNS[:4]}}
        ).fetchall()
    ]
    facts: dict[str, dict[str, Any]] = {}  # the first row of each fact, all its evidence
    for key, g in zip(keys, given, strict=True):
        if key in facts:
            facts[key]["ev"] |= g["ev"]
        else:
            facts[key] = g
    cols: dict[str, list[Any]] = {c: [f[c] for f in facts.values()] for c in _COLUMNS}
    cols["ev"] = ["{" + ",".join(map(str, sorted(e))) + "}" for e in cols["ev"]]
    found = conn.execute(
        _INSERT.format(vec=vec_cast(cols["emb"][0]).removeprefix("::")), {**fixed, **cols}
    ).fetchall()
    ids = {str(key): int(id_) for id_, key in found}
    assert ids.keys() == facts.keys()  # every fact is written or meets its existing row
    return [ids[k] for k in keys]


def replace_episodic_triples(
    conn: psycopg.Connection,
    user_id: str,
    segment_id: int,
    rows: Sequence[TripleWrite],
) -> list[int]:
    """Make ``rows`` the segment's episodic triples: insert them (idempotently, unchanged
    triples keep their ids) and delete the segment's other episodic triples, e.g. those a
    previous run of a replayed window extracted from a different caption."""
    ids = insert_triples(conn, user_id, segment_id, "episodic", rows)
    conn.execute(
        "DELETE FROM triples WHERE user_id = %s AND segment_id = %s"
        " AND memory_type = 'episodic' AND NOT (id = ANY(%s))",
        (user_id, segment_id, ids),
    )
    return ids


def _as_of_clause(memory_type: TripleType, as_of: datetime | None) -> str:
    """SQL condition (on alias t) for 'exists / is active at as_of' (params: %(as_of)s)."""
    if memory_type == "episodic":
        return "TRUE" if as_of is None else "t.valid_from <= %(as_of)s"
    if as_of is None:
        return "t.invalidated_at IS NULL"
    return (
        "t.valid_from <= %(as_of)s AND (t.invalidated_at IS NULL OR t.invalidated_at > %(as_of)s)"
    )


def _knn_semantic(
    conn: psycopg.Connection,
    user_id: str,
    embedding: Sequence[float] | np.ndarray,
    k: int,
    *,
    min_cosine: float = -1.0,
    as_of: datetime | None = None,
) -> list[tuple[TripleRow, float]]:
    q = as_vector(embedding)
    cast = vec_cast(q)
    where = _visible("semantic", None, as_of)
    rows = knn_dicts(
        conn,
        "WITH nearest AS MATERIALIZED ("
        f" SELECT t.id, t.embedding <=> %(q)s{cast} AS distance FROM triples t"
        f" WHERE {' AND '.join(where)}"
        f" ORDER BY t.embedding <=> %(q)s{cast} LIMIT %(k)s)"
        f" {_TRIPLE_SELECT}, n.distance FROM nearest n"
        " JOIN triples t ON t.user_id = %(u)s AND t.id = n.id"
        f" {_TRIPLE_JOINS} WHERE n.distance <= %(maxd)s ORDER BY n.distance, t.id",
        {"q": q, "u": user_id, "k": k, "as_of": as_of, "maxd": 1.0 - min_cosine},
        k=k,
    )
    return _scored(rows)


def _scored(rows: list[dict]) -> list[tuple[TripleRow, float]]:
    return [(TripleRow.model_validate(r), 1.0 - float(r["distance"])) for r in rows]


def similar_active_semantic_triples(
    conn: psycopg.Connection,
    user_id: str,
    embedding: Sequence[float] | np.ndarray,
    min_cosine: float,
    k: int,
    as_of: datetime | None = None,
) -> list[tuple[TripleRow, float]]:
    """Consolidation candidates: active semantic triples with cosine >= min_cosine, best first."""
    return _knn_semantic(conn, user_id, embedding, k, min_cosine=min_cosine, as_of=as_of)


def top_semantic_triples(
    conn: psycopg.Connection,
    user_id: str,
    embedding: Sequence[float] | np.ndarray,
    k: int,
    as_of: datetime | None = None,
) -> list[tuple[TripleRow, float]]:
    """The k semantic triples active at ``as_of`` nearest the query (their HNSW index), best
    first, with their cosine similarity."""
    return _knn_semantic(conn, user_id, embedding, k, as_of=as_of)


def top_episodic_in_segments(
    conn: psycopg.Connection,
    user_id: str,
    embedding: Sequence[float] | np.ndarray,
    k: int,
    segment_ids: Sequence[int],
    as_of: datetime | None = None,
) -> list[tuple[TripleRow, float]]:
    """The k episodic triples of ``segment_ids`` (existing at ``as_of``) nearest the query,
    best first, with their cosine similarity: an exact sort of those segments' triples, read
    by segment id. Episodic triples have no vector index (migration 0018): a caller picks the
    few segments worth looking into (the graph lane: the windows nearest the query)."""
    if not segment_ids or k <= 0:
        return []
    q = as_vector(embedding)
    cast = vec_cast(q)
    where = _visible("episodic", None, as_of)
    return _scored(
        fetch_dicts(
            conn,
            f"{_TRIPLE_SELECT}, t.embedding <=> %(q)s{cast} AS distance FROM triples t"
            f" {_TRIPLE_JOINS} WHERE {' AND '.join(where)} AND t.segment_id = ANY(%(ids)s)"
            " ORDER BY distance, t.id LIMIT %(k)s",
            {"q": q, "u": user_id, "k": k, "as_of": as_of, "ids": sorted(set(segment_ids))},
        )
    )


def invalidate_triples(
    conn: psycopg.Connection,
    user_id: str,
    ids: Sequence[int],
    at: datetime,
    replaced_by: int | None,
) -> int:
    """Soft-delete active semantic triples at event time ``at`` (never before their
    valid_from), pointing at the triple that replaced them; return how many changed.
    A triple is never marked as replaced by itself."""
    if not ids:
        return 0
    cur = conn.execute(
        "UPDATE triples SET invalidated_at = GREATEST(%s, valid_from), replaced_by = %s"
        " WHERE user_id = %s AND memory_type = 'semantic' AND invalidated_at IS NULL"
        " AND id = ANY(%s) AND id IS DISTINCT FROM %s",
        (at, replaced_by, user_id, list(ids), replaced_by),
    )
    return cur.rowcount


def _select(conn: psycopg.Connection, clause: str, params: object) -> list[TripleRow]:
    """Triples (alias t) ``WHERE <clause>`` (which may go on with ORDER BY and LIMIT)."""
    query = f"{_TRIPLE_SELECT} FROM triples t {_TRIPLE_JOINS} WHERE {clause}"
    return fetch_models(conn, TripleRow, query, params)


def get_triples(conn: psycopg.Connection, user_id: str, ids: Sequence[int]) -> list[TripleRow]:
    return _select(conn, "t.user_id = %s AND t.id = ANY(%s) ORDER BY t.id", (user_id, list(ids)))


def triples_for_segments(
    conn: psycopg.Connection, user_id: str, segment_ids: Sequence[int]
) -> list[TripleRow]:
    """Triples (either type) extracted from these segments, in segment then id order."""
    where = "t.user_id = %s AND t.segment_id = ANY(%s) ORDER BY t.segment_id, t.id"
    return _select(conn, where, (user_id, list(segment_ids)))


def _visible(memory_type: TripleType, scale: int | None, as_of: datetime | None) -> list[str]:
    """WHERE terms (on alias t) of the user's triples of a type (and scale) that exist at
    ``as_of``: what a graph holds and a search sees; params %(u)s, %(scale)s, %(as_of)s."""
    where = [f"t.user_id = %(u)s AND t.memory_type = '{memory_type}'"]
    where.append(_as_of_clause(memory_type, as_of))
    if scale is not None:
        where.append("t.scale_seconds = %(scale)s")
    return where


def graph_rows(
    conn: psycopg.Connection,
    user_id: str,
    memory_type: TripleType,
    scale: int | None = None,
    *,
    id_range: tuple[int, int] | None = None,
) -> list[tuple]:
    """Every row of a graph whatever its time, soft-deleted semantic ones included, each with
    its ``valid_from`` and ``invalidated_at``, oldest id first: a time-masked graph
    (``worldmm.graph.timed``) applies :func:`_as_of_clause` itself, per query. Plain tuples
    in the field order of ``worldmm.graph.types.GraphTriple``: a week's 30 s graph is about
    300k rows, and a model per row took most of its 16 s build. ``id_range=(after, upto)``
    keeps ids in ``(after, upto]``: the rows appended since a graph was built (see
    :func:`parse_fingerprint`)."""
    memory_type = _memory_type(memory_type)
    where = [f"t.user_id = %(u)s AND t.memory_type = '{memory_type}'"]
    if scale is not None:
        where.append("t.scale_seconds = %(scale)s")
    after, upto = id_range if id_range is not None else (None, None)
    if id_range is not None:
        where.append("t.id > %(after)s AND t.id <= %(upto)s")
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(
            "SELECT t.id, COALESCE(s.canonical_name, s.surface_form), t.predicate,"
            " COALESCE(o.canonical_name, o.surface_form, t.object_literal),"
            " t.object_entity_id IS NULL, t.segment_id, t.scale_seconds,"
            " t.valid_from, t.invalidated_at"
            f" FROM triples t {_TRIPLE_JOINS} WHERE {' AND '.join(where)} ORDER BY t.id",
            {"u": user_id, "scale": scale, "after": after, "upto": upto},
        )
        return cur.fetchall()


def list_semantic(
    conn: psycopg.Connection,
    user_id: str,
    history: bool = False,
    as_of: datetime | None = None,
    *,
    limit: int | None = None,
) -> list[TripleRow]:
    """Semantic facts, oldest first: active ones (at ``as_of`` or now), or with
    ``history=True`` every version including invalidated ones (known by ``as_of``)."""
    if history:
        clause = "TRUE" if as_of is None else "t.valid_from <= %(as_of)s"
    else:
        clause = _as_of_clause("semantic", as_of)
    return _select(
        conn,
        f"t.user_id = %(u)s AND t.memory_type = 'semantic' AND {clause}"
        " ORDER BY t.valid_from, t.id LIMIT %(limit)s",
        {"u": user_id, "as_of": as_of, "limit": limit},
    )


def parse_fingerprint(fingerprint: str | None) -> tuple[int, int, int] | None:
    """(row count, highest id, soft-deleted count) of :func:`triples_fingerprint`; None for
    anything else (then a reader cannot reason about what changed, and rebuilds)."""
    parts = (fingerprint or "").split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    count, top, invalidated = (int(p) for p in parts)
    return count, top, invalidated


def triples_fingerprint(
    conn: psycopg.Connection, user_id: str, memory_type: TripleType, scale: int | None = None
) -> str:
    """A cheap version stamp of the triples a graph is built from: any insert, soft delete
    or deletion (forget) of this user's triples of that type (and scale) changes it.

    Read from ``triple_counts``, which triggers keep in step with ``triples`` (migration
    0006): a primary-key read whatever the size of the memory. Without a scale, the
    counters of every scale of the type are summed."""
    memory_type = _memory_type(memory_type)
    where = "user_id = %s AND memory_type = %s" + (" AND scale_seconds = %s" if scale else "")
    args: tuple = (user_id, memory_type) + ((scale,) if scale else ())
    row = conn.execute(
        "SELECT COALESCE(sum(n), 0), COALESCE(max(top_id), 0), COALESCE(sum(invalidated), 0)"
        f" FROM triple_counts WHERE {where}",
        args,
    ).fetchone()
    assert row is not None  # an aggregate always returns one row
    return f"{row[0]}:{row[1]}:{row[2]}"
