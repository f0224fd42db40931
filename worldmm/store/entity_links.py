"""What the entity lane of episodic retrieval reads: which segments link which entities.

A segment links an entity when one of its episodic triples has it as subject or object
(triples point at canonical entities, so an alias resolved at ingest is the same id). The
people speaking in a window are linked this way too: transcript lines name their speaker
(``Shure: ...``) and extraction ties the speaker to what the line mentions.

The lane's read is bounded and ranked in one statement (:func:`ranked_windows`): a common
entity's links are read newest first up to a cap, only the windows whose score depends on
older links are read again, and the windows are scored in the database (the ranking and why
it holds: :mod:`worldmm.memory.retrieval.text_lanes`; the same read step by step in Python,
what the tests compare it with: ``tests/fixtures/entity_exact.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

import psycopg

from worldmm.models import BASE_SCALE
from worldmm.store.segment_search import Filters


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


def _entity_side(column: str, time: str) -> str:
    """The episodic triples naming ``q.e`` in ``column``, through its (user, entity, type,
    time) index (migration 0018), with the extra time conditions ``time``."""
    return (
        f"SELECT t.segment_id, t.valid_from FROM triples t WHERE t.user_id = %(u)s"
        f" AND t.{column} = q.e AND t.memory_type = 'episodic'{time}"
    )


def _newest_sides(time: str) -> str:
    """Entity ``q.e``'s links as subject, then as object, each newest first and at most
    ``%(cap)s``, with the extra time conditions ``time``: (subject, segment_id, valid_from)."""
    side = (
        "(SELECT {flag} AS subject, s.* FROM ({sql}) AS s ORDER BY s.valid_from DESC LIMIT %(cap)s)"
    )
    return (
        side.format(flag="true", sql=_entity_side("subject_entity_id", time))
        + " UNION ALL "
        + side.format(flag="false", sql=_entity_side("object_entity_id", time))
    )


def _capped_read(entities: str, time: str) -> str:
    """Two CTEs: ``hit``, each entity of ``entities`` (a FROM item naming it ``q.e``) with
    its newest links per side (:func:`_newest_sides`, time conditions ``time``); ``bound``,
    per capped entity (a side returned ``%(cap)s`` rows) the later of its full sides' last
    times, at or before which its links are not all known."""
    return (
        f"hit AS (SELECT q.e, l.subject, l.segment_id, l.valid_from FROM {entities}"
        f" CROSS JOIN LATERAL ({_newest_sides(time)}) AS l),"
        " bound AS (SELECT f.e, max(f.last) AS v FROM (SELECT e, min(valid_from) AS last"
        "  FROM hit GROUP BY e, subject HAVING count(*) >= %(cap)s) AS f GROUP BY f.e)"
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


class NewestWindows(NamedTuple):
    """An entity's newest windows from a bounded read: segment ids and window ends (epoch
    seconds) after ``cutoff``; ``cutoff`` None when every link was read (not capped)."""

    cutoff: float | None
    segments: list[int]
    ends: list[float]


def newest_windows(
    conn: psycopg.Connection, user_id: str, entity_ids: Sequence[int], cap: int, scale: int
) -> dict[int, NewestWindows]:
    """Per entity, the ``scale`` windows its newest links name (``cap`` as subject and
    ``cap`` as object, newest first), each once, and its boundary when a side returned
    ``cap`` (the later of its full sides' last times): the windows at or before it are left
    out, as some of their links were not read. One row per entity: the links are grouped in
    the database, not fetched (fetching them cost a twelve-week question 6 ms)."""
    ents = sorted(set(entity_ids))
    if not ents:
        return {}
    time = f" AND t.scale_seconds = {int(scale):d} AND t.segment_id IS NOT NULL"
    rows = conn.execute(
        f"WITH {_capped_read('unnest(%(ents)s::bigint[]) AS q(e)', time)},"
        " cut AS (SELECT e, extract(epoch FROM v)::float8 AS v FROM bound),"
        " win AS (SELECT e, segment_id, max(extract(epoch FROM valid_from))::float8 AS t"
        "  FROM hit GROUP BY e, segment_id)"
        " SELECT q.e, b.v, coalesce(array_agg(w.segment_id) FILTER (WHERE w.segment_id"
        "  IS NOT NULL), '{}'), coalesce(array_agg(w.t) FILTER (WHERE w.segment_id IS NOT NULL),"
        "  '{}') FROM unnest(%(ents)s::bigint[]) AS q(e) LEFT JOIN cut b ON b.e = q.e"
        " LEFT JOIN win w ON w.e = q.e AND (b.v IS NULL OR w.t > b.v) GROUP BY q.e, b.v",
        {"u": user_id, "ents": ents, "cap": cap},
    ).fetchall()
    return {int(e): NewestWindows(v, list(segs), list(ends)) for e, v, segs, ends in rows}


# --- the bounded read, ranked in one statement ------------------------------------------------
class RankedWindow(NamedTuple):
    """A 30 s window the entity lane ranks, with its score."""

    segment_id: int
    scale: int
    start: datetime
    end: datetime
    score: float


def _windows(ids: str, filters: Filters) -> str:
    """The complete segments whose ids ``ids`` (an SQL array) holds, within ``filters``, with
    their parents' windows (as :func:`windows_of`)."""
    return (
        "SELECT s.id, s.scale_seconds, s.window_start, s.window_end, s.parent_segment_id,"
        " p.window_start AS p_start, p.window_end AS p_end FROM segments s"
        " LEFT JOIN LATERAL (SELECT p.window_start, p.window_end FROM segments p"
        "  WHERE p.user_id = %(u)s AND p.id = s.parent_segment_id LIMIT 1) AS p ON true"
        f" WHERE s.user_id = %(u)s AND s.id = ANY({ids})"
        f" AND s.processing_status = 'complete'{filters.where('s')}"
    )


def ranked_windows(
    conn: psycopg.Connection,
    user_id: str,
    weights: Mapping[int, float],
    cap: int,
    k: int,
    filters: Filters,
    around: float,
) -> list[RankedWindow]:
    """The top ``k`` 30 s windows for the weighted entities, from a bounded read: ``cap``
    links per entity and side, newest first; an entity a side of which returned ``cap`` is
    capped at its boundary (as in :func:`newest_windows`), and the
    neighbourhoods of the windows that may hold its older links are read again in full (a
    30 s window ending at or before a boundary, or whose parent starts before one: its
    parent's window; a coarse segment holding an uncapped entity, starting before one: its
    own). Scored as :mod:`worldmm.memory.retrieval.text_lanes` scores them: the weights of
    the entities a window holds (summed in id order), plus ``around`` times those only its
    parent's neighbourhood holds; ties to the newer window. One statement, so what leaves
    the database is the ``k`` windows, not every link read (reading and scoring them in
    Python cost a four-week search more than the statements did)."""
    if not weights or k <= 0:
        return []
    time = _window_time(filters)
    within = " AND t.valid_from > sp.lo AND t.valid_from <= sp.hi" + time
    reread = (
        f"{_entity_side('subject_entity_id', within)}"
        f" UNION ALL {_entity_side('object_entity_id', within)}"
    )
    ents = sorted(weights)
    rows = conn.execute(
        # each entity's newest links per side; a side that returned ``cap`` rows caps its
        # entity, whose links at or before its boundary are left to the re-read
        "WITH q(e, w) AS (SELECT * FROM unnest(%(ents)s::bigint[], %(ws)s::float8[])),"
        f" {_capped_read('q', time)},"
        " edge AS (SELECT max(v) AS v FROM bound),"
        " held1 AS (SELECT DISTINCT h.e, h.segment_id FROM hit h LEFT JOIN bound b ON b.e = h.e"
        "  WHERE b.v IS NULL OR h.valid_from > b.v),"
        f" win1 AS ({_windows('ARRAY(SELECT DISTINCT segment_id FROM held1)', filters)}),"
        # windows whose score may depend on a capped entity's older links: a 30 s window
        # ending at or before a boundary, or whose parent starts before one (its parent's
        # window read again, or its own without a parent); a coarse segment holding an
        # uncapped entity that starts before one (its window)
        " span AS (SELECT DISTINCT"
        "  CASE WHEN w.scale_seconds = %(base)s AND w.p_start IS NOT NULL"
        "   AND w.p_end IS NOT NULL THEN w.p_start ELSE w.window_start END AS lo,"
        "  CASE WHEN w.scale_seconds = %(base)s AND w.p_start IS NOT NULL"
        "   AND w.p_end IS NOT NULL THEN w.p_end ELSE w.window_end END AS hi"
        "  FROM win1 w CROSS JOIN edge WHERE edge.v IS NOT NULL AND ("
        "  (w.scale_seconds = %(base)s AND NOT (w.window_end > edge.v"
        "   AND (w.parent_segment_id IS NULL OR coalesce(w.p_start >= edge.v, false))))"
        "  OR (w.scale_seconds <> %(base)s AND NOT w.window_start >= edge.v AND EXISTS ("
        "   SELECT 1 FROM held1 h WHERE h.segment_id = w.id"
        "   AND NOT EXISTS (SELECT 1 FROM bound b WHERE b.e = h.e))))),"
        # the capped entities' every link over those spans
        " held2 AS (SELECT DISTINCT q.e, l.segment_id FROM bound b JOIN q ON q.e = b.e"
        f"  CROSS JOIN span sp CROSS JOIN LATERAL ({reread}) AS l),"
        " held AS (SELECT e, segment_id FROM held1 UNION SELECT e, segment_id FROM held2),"
        " win AS (SELECT * FROM win1 UNION ALL "
        + _windows(
            "ARRAY(SELECT DISTINCT h.segment_id FROM held2 h"
            " WHERE NOT EXISTS (SELECT 1 FROM win1 w WHERE w.id = h.segment_id))",
            filters,
        )
        + "),"
        " lk AS (SELECT w.id, w.scale_seconds, w.window_start, w.window_end,"
        "  w.parent_segment_id, h.e FROM win w JOIN held h ON h.segment_id = w.id),"
        # who is around a window: what its parent and its parent's other children hold
        " nk AS MATERIALIZED (SELECT n.key, array_agg(n.e ORDER BY n.e) AS es,"
        "  array_agg(q.w ORDER BY n.e) AS ws FROM (SELECT DISTINCT CASE WHEN scale_seconds"
        "  = %(base)s THEN parent_segment_id ELSE id END AS key, e FROM lk) AS n"
        "  JOIN q ON q.e = n.e WHERE n.key IS NOT NULL GROUP BY n.key),"
        " own AS (SELECT lk.id, lk.window_start, lk.window_end, lk.parent_segment_id,"
        "  array_agg(lk.e) AS es, sum(q.w ORDER BY lk.e) AS s FROM lk JOIN q ON q.e = lk.e"
        "  WHERE lk.scale_seconds = %(base)s"
        "  GROUP BY lk.id, lk.window_start, lk.window_end, lk.parent_segment_id"
        "  HAVING bool_or(q.w > 0))"
        " SELECT o.id, o.window_start, o.window_end, o.s + %(around)s * coalesce(("
        "  SELECT sum(x.w ORDER BY x.e) FROM unnest(nk.es, nk.ws) AS x(e, w)"
        "  WHERE x.e <> ALL(o.es)), 0) AS score"
        " FROM own o LEFT JOIN nk ON nk.key = o.parent_segment_id"
        " ORDER BY score DESC, o.window_end DESC, o.id LIMIT %(k)s",
        {
            "u": user_id,
            "ents": ents,
            "ws": [float(weights[e]) for e in ents],
            "cap": cap,
            "base": BASE_SCALE,
            "around": float(around),
            "k": k,
            **filters.params(),
        },
    ).fetchall()
    return [RankedWindow(int(r[0]), BASE_SCALE, r[1], r[2], float(r[3])) for r in rows]
