"""What the entity lane of episodic retrieval reads: which segments link which entities.

A segment links an entity when one of its episodic triples has it as subject or object
(triples point at canonical entities, so an alias resolved at ingest is the same id). The
people speaking in a window are linked this way too: transcript lines name their speaker
(``Shure: ...``) and extraction ties the speaker to what the line mentions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import psycopg

from worldmm.store.segment_search import Filters


class EntityLinks(NamedTuple):
    """One segment and the entities among those asked for that it links."""

    segment_id: int
    scale: int
    start: datetime
    end: datetime
    parent_id: int | None
    entity_ids: frozenset[int]


def canonical_ids(
    conn: psycopg.Connection, user_id: str, surfaces: Sequence[str]
) -> dict[str, int]:
    """Lower-cased surface form -> canonical entity id, for the surfaces this user has (an
    alias gives its canonical entity's id)."""
    wanted = sorted({s.strip().lower() for s in surfaces if s.strip()})
    if not wanted:
        return {}
    rows = conn.execute(
        "SELECT lower(surface_form), COALESCE(canonical_entity_id, id) FROM entities"
        " WHERE user_id = %s AND lower(surface_form) = ANY(%s)",
        (user_id, wanted),
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def linked_segments(
    conn: psycopg.Connection,
    user_id: str,
    entity_ids: Sequence[int],
    *,
    as_of: datetime | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[EntityLinks]:
    """Every complete segment (any scale) that links one of ``entity_ids`` through its
    episodic triples, with the ones it links, filtered like the other lanes' reads."""
    if not entity_ids:
        return []
    # Two reads, not one join: joined, the planner hashed the user's whole segments table
    # (a week: 24,360 rows) to meet the ~1,000 triples of a common entity. The segments are
    # then read by id, through the (user_id, id) key, whatever the memory's size.
    found = conn.execute(
        "SELECT t.segment_id, array_agg(DISTINCT x.e) FROM triples t"
        " CROSS JOIN LATERAL (VALUES (t.subject_entity_id), (t.object_entity_id)) AS x(e)"
        " WHERE t.user_id = %(u)s AND t.memory_type = 'episodic'"
        " AND (t.subject_entity_id = ANY(%(ents)s) OR t.object_entity_id = ANY(%(ents)s))"
        " AND x.e = ANY(%(ents)s) GROUP BY t.segment_id",
        {"u": user_id, "ents": list(entity_ids)},
    ).fetchall()
    held = {int(r[0]): frozenset(int(e) for e in r[1]) for r in found}
    if not held:
        return []
    filters = Filters(as_of, start, end, ids=sorted(held))
    rows = conn.execute(
        "SELECT s.id, s.scale_seconds, s.window_start, s.window_end, s.parent_segment_id"
        " FROM segments s WHERE s.user_id = %(u)s"
        f" AND s.processing_status = 'complete'{filters.where('s')} ORDER BY s.id",
        {"u": user_id, **filters.params()},
    ).fetchall()
    return [
        EntityLinks(
            int(r[0]),
            int(r[1]),
            r[2],
            r[3],
            int(r[4]) if r[4] is not None else None,
            held[int(r[0])],
        )
        for r in rows
    ]
