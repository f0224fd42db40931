"""What the entity lane of episodic retrieval reads: which segments link which entities.

A segment links an entity when one of its episodic triples has it as subject or object
(triples point at canonical entities, so an alias resolved at ingest is the same id). The
people speaking in a window are linked this way too: transcript lines name their speaker
(``Shure: ...``) and extraction ties the speaker to what the line mentions.

The lane's read is bounded (:func:`bounded_links`): a common entity's links are read newest
first up to a cap, and only the windows whose score depends on older links are read again
(the ranking and why it holds: :mod:`worldmm.memory.retrieval.text_lanes`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
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
    scale: int | None = None,
) -> list[LinkRow]:
    """Each entity's links (every scale, or ``scale``'s) within ``filters``' time, newest
    first, at most ``cap`` as subject and ``cap`` as object: a read bounded by the cap,
    however many windows share the entity. Ties at the last time read may be cut."""
    if not entity_ids:
        return []
    time = _window_time(filters)
    if scale is not None:
        time += f" AND t.scale_seconds = {int(scale):d} AND t.segment_id IS NOT NULL"
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
        "  WHERE p.user_id = %(u)s AND p.id = s.parent_segment_id LIMIT 1) AS p ON true"
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


# --- the bounded read -------------------------------------------------------------------------
Span = tuple[datetime, datetime]


def boundaries(rows: Iterable[LinkRow], cap: int) -> dict[int, datetime]:
    """Per capped entity (a side of it returned ``cap`` rows, newest first), the time at and
    before which its links are unknown: the later of its full sides' last times."""
    count: dict[tuple[int, bool], int] = defaultdict(int)
    last: dict[tuple[int, bool], datetime] = {}
    for r in rows:
        count[(r.entity_id, r.subject)] += 1
        last[(r.entity_id, r.subject)] = r.valid_from
    out: dict[int, datetime] = {}
    for (entity, subject), n in count.items():
        if n >= cap:
            at = last[(entity, subject)]
            out[entity] = max(out.get(entity, at), at)
    return out


class Known:
    """What a bounded read has seen: each segment's asked entities, the segments' windows,
    the capped entities' boundaries, and the windows read again in full."""

    def __init__(self, bounds: Mapping[int, datetime]) -> None:
        self.bounds = dict(bounds)
        self.held: dict[int, set[int]] = defaultdict(set)
        self.windows: dict[int, LinkedWindow] = {}
        self.spans: set[Span] = set()

    def add(self, links: Iterable[tuple[int, int, datetime]], *, complete: bool) -> None:
        """(entity, segment, time) links; unless ``complete`` (read over a whole span), a
        capped entity's at or before its boundary are left out: some of their ties may be
        missing, and the windows they belong to are read again."""
        for entity, segment, at in links:
            bound = self.bounds.get(entity)
            if complete or bound is None or at > bound:
                self.held[segment].add(entity)

    def unread(self) -> list[int]:
        return sorted(s for s in self.held if s not in self.windows)

    def after_bounds(self, at: datetime | None) -> bool:
        """Whether every capped entity's links after ``at`` are all known."""
        return at is not None and all(at >= v for v in self.bounds.values())

    def certain(self, w: LinkedWindow) -> bool:
        """Whether the 30 s window's score is exact: its own links and its neighbourhood's
        are known for every capped entity."""
        own = all(w.end > v for v in self.bounds.values()) or any(
            lo < w.end <= hi for lo, hi in self.spans
        )
        if w.parent_id is None:
            return own
        return own and (self.after_bounds(w.parent_start) or _parent_span(w) in self.spans)

    def to_read(self) -> set[Span]:
        """The windows to read again for the capped entities: the neighbourhood of every
        uncertain 30 s window (its parent's window, or its own without a parent), and each
        coarse segment naming an entity read in full (its children are near that one)."""
        out: set[Span] = set()
        for sid, w in self.windows.items():
            if w.scale == BASE_SCALE:
                if not self.certain(w):
                    out.add(_parent_span(w) or (w.start, w.end))
            elif self.held.get(sid, set()) - self.bounds.keys() and not self.after_bounds(w.start):
                out.add((w.start, w.end))
        return out - self.spans

    def links(self) -> list[EntityLinks]:
        return [
            EntityLinks(w.segment_id, w.scale, w.start, w.end, w.parent_id, frozenset(held))
            for sid, w in self.windows.items()
            if (held := self.held.get(sid))
        ]


def _parent_span(w: LinkedWindow) -> Span | None:
    if w.parent_start is None or w.parent_end is None:
        return None
    return (w.parent_start, w.parent_end)


def bounded_links(
    conn: psycopg.Connection,
    user_id: str,
    entity_ids: Sequence[int],
    cap: int,
    filters: Filters,
) -> Known:
    """Every window the bounded read reaches (``cap`` links per entity and side, newest
    first) with the asked entities it links, and what the read saw (what a proof of
    exactness needs; the lane does not prove it)."""
    rows = newest_links(conn, user_id, sorted(entity_ids), cap, filters)
    known = Known(boundaries(rows, cap))
    known.add(((r.entity_id, r.segment_id, r.valid_from) for r in rows), complete=False)
    known.windows = windows_of(conn, user_id, known.unread(), filters)
    if spans := known.to_read():
        capped = sorted(known.bounds)
        known.add(links_within(conn, user_id, capped, spans, filters), complete=True)
        known.spans |= spans
        known.windows |= windows_of(conn, user_id, known.unread(), filters)
    return known
