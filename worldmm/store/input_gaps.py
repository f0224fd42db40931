"""Lost input per wearer and span of capture time (schema/0017_input_gaps.sql).

The dataflow records a gap for every wearer whose records go to the partition that lost
them (dataflows/input_gaps.py); a window of that wearer overlapping the gap's span
"may be missing input". The mark is read on overlap, not written on segments: a window built
(or rebuilt) after the gap was found is marked like one built before, and no segment write
has to know about gaps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import psycopg

from worldmm.store.distribute import spans_wearers


@dataclass(frozen=True)
class InputGapSpan:
    """Offsets ``[first_offset, end_offset)`` of ``topic``/``partition`` were lost; the lost
    records were captured within ``[span_start, span_end]`` (``span_start`` None: unbounded)."""

    topic: str
    partition: int
    first_offset: int
    end_offset: int
    reason: str
    span_start: datetime | None
    span_end: datetime

    @property
    def records(self) -> int:
        return self.end_offset - self.first_offset

    def overlaps(self, start: datetime, end: datetime) -> bool:
        """Whether the window ``[start, end)`` overlaps the span."""
        return start <= self.span_end and (self.span_start is None or end > self.span_start)


def gaps_in(gaps: Iterable[InputGapSpan], start: datetime, end: datetime) -> list[InputGapSpan]:
    """The gaps whose span overlaps the window ``[start, end)``."""
    return [g for g in gaps if g.overlaps(start, end)]


def record_gap(
    conn: psycopg.Connection,
    user_ids: Iterable[str],
    gap: InputGapSpan,
) -> int:
    """The gap, for each of ``user_ids`` the database knows (a wearer without a row has no
    memory to mark); idempotent. Returns how many rows were new."""
    spans_wearers(conn)  # every wearer of a partition
    return conn.execute(
        "INSERT INTO input_gaps (user_id, topic, partition, first_offset, end_offset, reason,"
        " span_start, span_end) SELECT id, %s, %s, %s, %s, %s, %s, %s FROM users"
        " WHERE id = ANY(%s) ON CONFLICT DO NOTHING",
        (
            gap.topic,
            gap.partition,
            gap.first_offset,
            gap.end_offset,
            gap.reason,
            gap.span_start,
            gap.span_end,
            sorted(set(user_ids)),
        ),
    ).rowcount


def known_users(conn: psycopg.Connection) -> list[str]:
    """Every wearer the database knows (the partitioner maps them to partitions)."""
    spans_wearers(conn)
    return [r[0] for r in conn.execute("SELECT id FROM users ORDER BY id").fetchall()]


def list_gaps(
    conn: psycopg.Connection,
    user_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[InputGapSpan]:
    """The wearer's gaps whose span overlaps ``[start, end)`` (either end open: unbounded),
    oldest first."""
    rows = conn.execute(
        "SELECT topic, partition, first_offset, end_offset, reason, span_start, span_end"
        " FROM input_gaps WHERE user_id = %s AND (%s::timestamptz IS NULL OR span_end >= %s)"
        " AND (%s::timestamptz IS NULL OR span_start IS NULL OR span_start < %s)"
        " ORDER BY span_end, topic, partition, first_offset",
        (user_id, start, start, end, end),
    ).fetchall()
    return [InputGapSpan(*r) for r in rows]


def marked_windows(conn: psycopg.Connection, user_ids: list[str], scale_seconds: int = 30) -> int:
    """How many of the wearers' windows of ``scale_seconds`` overlap one of their gaps (one
    wearer per statement: a router query on Citus)."""
    return sum(
        conn.execute(
            "SELECT count(*) FROM segments s WHERE s.user_id = %s AND s.scale_seconds = %s"
            " AND EXISTS (SELECT 1 FROM input_gaps g WHERE g.user_id = s.user_id"
            " AND g.span_end >= s.window_start"
            " AND (g.span_start IS NULL OR g.span_start < s.window_end))",
            (user_id, scale_seconds),
        ).fetchone()[0]
        for user_id in user_ids
    )
