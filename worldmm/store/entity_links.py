"""What the entity lane of episodic retrieval reads: which segments link which entities.

A segment links an entity when one of its episodic triples has it as subject or object
(triples point at canonical entities, so an alias resolved at ingest is the same id). The
people speaking in a window are linked this way too: transcript lines name their speaker
(``Shure: ...``) and extraction ties the speaker to what the line mentions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

import psycopg

from worldmm.models import BASE_SCALE
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


class LinkedWindow(NamedTuple):
    """A segment that links an asked entity, with its parent's window (None without one)."""

    segment_id: int
    scale: int
    start: datetime
    end: datetime
    parent_id: int | None
    parent_start: datetime | None
    parent_end: datetime | None


class LinkRow(NamedTuple):
    """An asked entity named by an episodic triple of a segment (as its subject, or object),
    at the segment's window end."""

    entity_id: int
    subject: bool
    segment_id: int
    valid_from: datetime


def _entity_side(column: str, time: str) -> str:
    """The episodic triples naming ``q.e`` in ``column``, through its (user, entity, type,
    time) index (migration 0018), with the extra time conditions ``time``."""
    return (
        f"SELECT t.segment_id, t.valid_from FROM triples t WHERE t.user_id = %(u)s"
        f" AND t.{column} = q.e AND t.memory_type = 'episodic'{time}"
    )


def _window_time(filters: Filters) -> str:
    """``filters``' as_of and window range on a triple's time (its segment's window end),
    without reading the segment: a segment is at most its scale long, so one ending before
    ``end`` plus its scale can overlap the range (the segments read later check exactly)."""
    where = ""
    if filters.as_of is not None:
        where += " AND t.valid_from <= %(as_of)s"
    if filters.start is not None:
        where += " AND t.valid_from > %(start)s"
    if filters.end is not None:
        where += " AND t.valid_from < %(end)s + make_interval(secs => t.scale_seconds)"
    return where


def base_links_top(conn: psycopg.Connection, user_id: str) -> int:
    """The highest id of the user's 30 s episodic triples (0 without any)."""
    row = conn.execute(
        "SELECT coalesce(max(id), 0) FROM triples WHERE user_id = %s"
        " AND memory_type = 'episodic' AND scale_seconds = %s",
        (user_id, BASE_SCALE),
    ).fetchone()
    return int(row[0]) if row else 0


def base_links(
    conn: psycopg.Connection, user_id: str, entity_ids: Sequence[int]
) -> list[tuple[int, int, float]]:
    """(entity, segment, window end in epoch seconds) of every 30 s window whose episodic
    triples name one of ``entity_ids``, read from the entities' indexes."""
    if not entity_ids:
        return []
    side = _entity_side(
        "{column}", f" AND t.scale_seconds = {BASE_SCALE:d} AND t.segment_id IS NOT NULL"
    )
    rows = conn.execute(
        "SELECT DISTINCT q.e, l.segment_id, extract(epoch FROM l.valid_from)::float8"
        " FROM unnest(%(ents)s::bigint[]) AS q(e) CROSS JOIN LATERAL ("
        + side.format(column="subject_entity_id")
        + " UNION ALL "
        + side.format(column="object_entity_id")
        + ") AS l",
        {"u": user_id, "ents": sorted(set(entity_ids))},
    ).fetchall()
    return [(int(e), int(seg), float(at)) for e, seg, at in rows]


def base_links_since(
    conn: psycopg.Connection, user_id: str, after_id: int, upto_id: int
) -> list[tuple[int, int | None, int, float]]:
    """(subject, object, segment, window end in epoch seconds) of the user's 30 s episodic
    triples with an id in ``(after_id, upto_id]``: those written since a read."""
    rows = conn.execute(
        "SELECT subject_entity_id, object_entity_id, segment_id,"
        " extract(epoch FROM valid_from)::float8 FROM triples WHERE user_id = %s"
        " AND memory_type = 'episodic' AND scale_seconds = %s AND id > %s AND id <= %s"
        " AND segment_id IS NOT NULL",
        (user_id, BASE_SCALE, after_id, upto_id),
    ).fetchall()
    return [(int(s), int(o) if o is not None else None, int(g), float(t)) for s, o, g, t in rows]


def newest_links(
    conn: psycopg.Connection,
    user_id: str,
    entity_ids: Sequence[int],
    cap: int,
    filters: Filters = Filters(),
) -> list[LinkRow]:
    """Each entity's links (every scale) within ``filters``' time, newest first, at most
    ``cap`` as subject and ``cap`` as object: a read bounded by the cap, however many windows
    share the entity. Ties at the last time read may be cut."""
    if not entity_ids:
        return []
    time = _window_time(filters)
    side = (
        "(SELECT {flag} AS subject, s.* FROM ({sql}) AS s ORDER BY s.valid_from DESC LIMIT %(cap)s)"
    )
    rows = conn.execute(
        "SELECT q.e, l.subject, l.segment_id, l.valid_from FROM unnest(%(ents)s::bigint[]) AS q(e)"
        " CROSS JOIN LATERAL ("
        + side.format(flag="true", sql=_entity_side("subject_entity_id", time))
        + " UNION ALL "
        + side.format(flag="false", sql=_entity_side("object_entity_id", time))
        + ") AS l",
        {"u": user_id, "ents": sorted(set(entity_ids)), "cap": cap, **filters.params()},
    ).fetchall()
    return [LinkRow(int(e), bool(sub), int(seg), at) for e, sub, seg, at in rows]


def links_within(
    conn: psycopg.Connection,
    user_id: str,
    entity_ids: Sequence[int],
    spans: Iterable[tuple[datetime, datetime]],
    filters: Filters = Filters(),
) -> list[tuple[int, int, datetime]]:
    """(entity, segment, time) of every link of ``entity_ids`` whose time lies in one of
    ``spans`` (``(lo, hi]``, a window or its parent's) and in ``filters``' time: a range read
    of each entity's index per span."""
    pairs = sorted(set(spans))
    if not entity_ids or not pairs:
        return []
    time = " AND t.valid_from > sp.lo AND t.valid_from <= sp.hi" + _window_time(filters)
    rows = conn.execute(
        "SELECT DISTINCT q.e, l.segment_id, l.valid_from FROM unnest(%(ents)s::bigint[]) AS q(e)"
        " CROSS JOIN unnest(%(lo)s::timestamptz[], %(hi)s::timestamptz[]) AS sp(lo, hi)"
        f" CROSS JOIN LATERAL ({_entity_side('subject_entity_id', time)} UNION ALL"
        f" {_entity_side('object_entity_id', time)}) AS l",
        {
            "u": user_id,
            "ents": sorted(set(entity_ids)),
            "lo": [lo for lo, _ in pairs],
            "hi": [hi for _, hi in pairs],
            **filters.params(),
        },
    ).fetchall()
    return [(int(e), int(seg), at) for e, seg, at in rows]


def windows_of(
    conn: psycopg.Connection, user_id: str, ids: Sequence[int], filters: Filters = Filters()
) -> dict[int, LinkedWindow]:
    """The complete segments among ``ids`` within ``filters``, with their parents' windows,
    read by id through the (user_id, id) key."""
    if not ids:
        return {}
    where = Filters(filters.as_of, filters.start, filters.end, ids=sorted(set(ids)))
    rows = conn.execute(
        "SELECT s.id, s.scale_seconds, s.window_start, s.window_end, s.parent_segment_id,"
        " p.window_start, p.window_end FROM segments s"
        # a look-up per row (LIMIT keeps the planner from joining, which hashed the user's
        # whole segments table to meet a few hundred rows)
        " LEFT JOIN LATERAL (SELECT p.window_start, p.window_end FROM segments p"
        "  WHERE p.user_id = s.user_id AND p.id = s.parent_segment_id LIMIT 1) AS p ON true"
        " WHERE s.user_id = %(u)s"
        f" AND s.processing_status = 'complete'{where.where('s')} ORDER BY s.id",
        {"u": user_id, **where.params()},
    ).fetchall()
    return {
        int(r[0]): LinkedWindow(
            int(r[0]), int(r[1]), r[2], r[3], int(r[4]) if r[4] is not None else None, r[5], r[6]
        )
        for r in rows
    }
