"""Term statistics kept up to date by counting only what changed equal a whole recount, on
PostgreSQL: new windows, a pending window that completes, a new pending one, in any scale."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from tests.fixtures.store import T0, make_segment
from worldmm.memory.retrieval import frequencies
from worldmm.store import term_stats as ts

pytestmark = pytest.mark.integration

WORDS = ("kettle", "garden", "violin", "ladder", "compass", "lantern", "pepper", "anchor")


def _write(conn, user_id: str, i: int, rng: random.Random, status: str = "complete") -> None:
    caption = " ".join(rng.choices(WORDS, k=rng.randint(1, 9)))
    start, scale = T0 + timedelta(seconds=30 * i), 180 if i % 6 == 0 else 30
    make_segment(conn, user_id, start, scale, caption=caption, processing_status=status)


def _same(a: ts.TermStats, b: ts.TermStats) -> None:
    assert (a.docs, a.df, a.scale_docs) == (b.docs, b.df, b.scale_docs)
    assert a.mean_length == pytest.approx(b.mean_length)
    assert np.array_equal(a.base_ends, b.base_ends)


def test_kept_up_to_date_equals_a_whole_count(db, conn, user_id, monkeypatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(frequencies.time, "monotonic", lambda: clock[0])
    counted: list[ts.Coverage] = []
    real = ts.read_since
    monkeypatch.setattr(
        frequencies.ts,
        "read_since",
        lambda c, u, before, now: counted.append(before) or real(c, u, before, now),
    )
    rng = random.Random(3)
    for i in range(40):
        _write(conn, user_id, i, rng, "pending" if i in (37, 39) else "complete")
    conn.commit()
    memo = frequencies.TermStatsMemo(spawn=lambda job: job())
    first = memo.get(conn, db, user_id)
    assert first.docs == 38 and counted == [ts.NOTHING]
    seen = ts.coverage(conn, user_id)
    assert len(seen.pending) == 2
    _same(first, ts.read_all(conn, user_id)[0])

    for i in range(40, 52):
        _write(conn, user_id, i, rng, "pending" if i == 51 else "complete")
    _write(conn, user_id, 37, rng)  # the pending window completes (same row, new text)
    conn.commit()
    clock[0] += frequencies.TERM_STATS_CHECK_S
    second = memo.get(conn, db, user_id)
    assert counted[-1] == seen  # only what changed since was counted
    _same(second, ts.read_all(conn, user_id)[0])
    assert second.docs == first.docs + 12  # 11 new complete + the one completed

    _write(conn, user_id, 51, rng)
    _write(conn, user_id, 39, rng)
    conn.commit()
    clock[0] += frequencies.TERM_STATS_RECOUNT_S  # old enough for the whole recount as well
    memo.get(conn, db, user_id)
    assert counted[-1] == ts.NOTHING  # the recount ran (at once, in this test)
    _same(memo.get(conn, db, user_id), ts.read_all(conn, user_id)[0])
