"""The corpus statistics the lexical and entity lanes weigh by: each lexeme's document
frequency over a user's segments, the mean lexeme count per scale, the 30 s window ends.

Counting them reads every segment (``ts_stat``: 0.5 s at four weeks, 2 at twelve) while a
live memory grows every 30 s; so they are counted once, and each read records its
:class:`Coverage` (the highest id seen, and the pending ids below it) so that
:func:`read_since` counts only the segments completed since, which :func:`merge` adds. Edits
to a counted segment (a retriggered or deleted window) need a whole recount now and then.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import numpy as np
import psycopg
from psycopg import sql

from worldmm.models import BASE_SCALE


class Coverage(NamedTuple):
    """Which segments a count saw: every complete one with id up to ``upto`` except
    ``pending`` (ids up to ``upto`` that were pending then, counted once they complete)."""

    upto: int
    pending: tuple[int, ...]


NOTHING = Coverage(0, ())


class TermStats(NamedTuple):
    """Document frequencies of a user's segment lexemes, the complete segments and their
    mean lexeme count per scale, and the end times (epoch seconds, ascending) of the complete
    30 s windows, which the entity lane's IDF counts at ``as_of``."""

    docs: int
    df: dict[str, int]
    mean_length: dict[int, float]
    base_ends: np.ndarray
    scale_docs: dict[int, int]

    def windows_at(self, as_of: datetime | None) -> int:
        """How many complete 30 s windows had ended by ``as_of`` (None: all of them)."""
        if as_of is None:
            return len(self.base_ends)
        return int(np.searchsorted(self.base_ends, as_of.timestamp(), side="right"))


def coverage(conn: psycopg.Connection, user_id: str) -> Coverage:
    """The user's highest segment id and the pending segments up to it (two index reads)."""
    upto = conn.execute(
        "SELECT coalesce(max(id), 0) FROM segments WHERE user_id = %s", (user_id,)
    ).fetchone()
    top = int(upto[0]) if upto else 0
    rows = conn.execute(
        "SELECT id FROM segments WHERE user_id = %s AND processing_status = 'pending'"
        " AND id <= %s ORDER BY id",
        (user_id, top),
    ).fetchall()
    return Coverage(top, tuple(int(r[0]) for r in rows))


def read_since(
    conn: psycopg.Connection, user_id: str, before: Coverage, now: Coverage
) -> TermStats:
    """The statistics of the segments ``now`` covers and ``before`` did not: ids above
    ``before.upto`` (up to ``now.upto``, less ``now.pending``) and ``before.pending`` ones
    that are no longer pending. ``before`` = :data:`NOTHING` counts everything ``now``
    covers."""
    pending = list(now.pending)
    revisited = [i for i in before.pending if i not in set(pending)]
    span = sql.SQL("id > {} AND id <= {}").format(sql.Literal(before.upto), sql.Literal(now.upto))
    if pending:
        span = sql.SQL("{} AND NOT id = ANY({})").format(span, sql.Literal(pending))
    if revisited:
        span = sql.SQL("({}) OR id = ANY({})").format(span, sql.Literal(revisited))
    where = sql.SQL("processing_status = 'complete' AND user_id = {} AND ({})").format(
        sql.Literal(user_id), span
    )
    docs_sql = sql.SQL("SELECT search_tsv FROM segments WHERE {}").format(where)
    df = {
        word: int(ndoc)
        for word, ndoc in conn.execute(
            "SELECT word, ndoc FROM ts_stat(%s)", (docs_sql.as_string(conn),)
        )
    }
    rows = conn.execute(
        sql.SQL(
            "SELECT scale_seconds, count(*), avg(length(search_tsv)) FROM segments"
            " WHERE {} GROUP BY 1"
        ).format(where)
    ).fetchall()
    ends = conn.execute(
        sql.SQL(
            "SELECT extract(epoch FROM window_end)::float8 FROM segments"
            " WHERE {} AND scale_seconds = {} ORDER BY 1"
        ).format(where, sql.Literal(BASE_SCALE))
    ).fetchall()
    return TermStats(
        docs=sum(int(n) for _s, n, _m in rows),
        df=df,
        mean_length={int(s): float(m or 0.0) for s, _n, m in rows},
        base_ends=np.array([r[0] for r in ends], dtype=np.float64),
        scale_docs={int(s): int(n) for s, n, _m in rows},
    )


def read_all(conn: psycopg.Connection, user_id: str) -> tuple[TermStats, Coverage]:
    """Every complete segment's statistics, and what they cover."""
    now = coverage(conn, user_id)
    return read_since(conn, user_id, NOTHING, now), now


def merge(old: TermStats, new: TermStats) -> TermStats:
    """The statistics of two disjoint sets of segments together."""
    df = dict(old.df)
    for word, n in new.df.items():
        df[word] = df.get(word, 0) + n
    scales = {s for stats in (old, new) for s in stats.scale_docs}
    counts = {s: old.scale_docs.get(s, 0) + new.scale_docs.get(s, 0) for s in scales}
    mean = {
        s: (
            old.mean_length.get(s, 0.0) * old.scale_docs.get(s, 0)
            + new.mean_length.get(s, 0.0) * new.scale_docs.get(s, 0)
        )
        / counts[s]
        for s in counts
        if counts[s]
    }
    at = np.searchsorted(old.base_ends, new.base_ends)  # new windows mostly end last
    return TermStats(
        docs=old.docs + new.docs,
        df=df,
        mean_length=mean,
        base_ends=np.insert(old.base_ends, at, new.base_ends),
        scale_docs=counts,
    )
