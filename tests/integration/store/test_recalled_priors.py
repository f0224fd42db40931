"""The ranking priors' two reads: every candidate's importance and recall count, or, while
importance weighs nothing, only the recalled candidates through their own small index."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.fixtures.store import T0, make_segment
from worldmm.store.importance_recall import recalled_segments, reinforce, segment_priors
from worldmm.store.users import ensure_user

pytestmark = pytest.mark.integration


def test_only_the_recalled_candidates_are_read_and_their_counts_match(conn, user_id) -> None:
    ensure_user(conn, user_id)
    ids = [
        make_segment(conn, user_id, T0 + timedelta(seconds=30 * i), importance=0.1 * i)
        for i in range(8)
    ]
    other = f"{user_id}-other"
    ensure_user(conn, other)
    theirs = make_segment(conn, other, T0)
    reinforce(conn, user_id, {ids[1]: 2, ids[5]: 1}, {}, T0 + timedelta(days=1))
    reinforce(conn, other, {theirs: 4}, {}, T0 + timedelta(days=1))
    conn.commit()

    every = segment_priors(conn, user_id, ids)
    assert set(every) == set(ids) and every[ids[3]].importance == pytest.approx(0.3)
    recalled = recalled_segments(conn, user_id, [*ids, theirs])
    # the recalled ones alone, with the same counts; another wearer's never
    assert recalled == {i: (None, every[i].recall_count) for i in (ids[1], ids[5])}
    assert {i: p.recall_count for i, p in every.items() if p.recall_count} == {
        ids[1]: 2,
        ids[5]: 1,
    }
    assert recalled_segments(conn, other, ids) == {}


def test_the_recalled_read_is_answered_by_its_partial_index(conn, user_id) -> None:
    ensure_user(conn, user_id)
    ids = [make_segment(conn, user_id, T0 + timedelta(seconds=30 * i)) for i in range(200)]
    reinforce(conn, user_id, {ids[7]: 1}, {}, T0 + timedelta(days=1))
    conn.commit()
    conn.execute("ANALYZE segments")
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_seqscan = off")  # a tiny table: the choice, not size
        (plan,) = conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT id, recall_count FROM segments"
            " WHERE user_id = %s AND recall_count > 0 AND id = ANY(%s)",
            (user_id, ids),
        ).fetchone()
    text = json.dumps(plan)
    assert "segments_recalled_idx" in text, text
