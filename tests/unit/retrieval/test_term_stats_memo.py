"""The lexical lane's term statistics: served from memory while young, rechecked when old."""

from __future__ import annotations

import numpy as np

from worldmm.memory.retrieval import lanes
from worldmm.store.segment_search import TermStats


def test_young_copy_asks_nothing_old_copy_checks_the_stamp(monkeypatch) -> None:
    clock = [1000.0]
    stamp = [(10, 99)]
    calls = {"stamp": 0, "stats": 0}

    def segment_count_stamp(conn, user_id):
        calls["stamp"] += 1
        return stamp[0]

    def term_stats(conn, user_id):
        calls["stats"] += 1
        return TermStats(
            docs=stamp[0][0], df={"cup": calls["stats"]}, mean_length={}, base_ends=np.zeros(0)
        )

    monkeypatch.setattr(lanes.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(lanes.ss, "segment_count_stamp", segment_count_stamp)
    monkeypatch.setattr(lanes.ss, "term_stats", term_stats)
    memo = lanes.TermStatsMemo(max_users=2)

    first = memo.get(None, 1, "u")
    assert calls == {"stamp": 1, "stats": 1}
    clock[0] += lanes.TERM_STATS_MAX_AGE_S / 2
    assert memo.get(None, 1, "u") is first
    assert calls == {"stamp": 1, "stats": 1}  # young: no query at all
    clock[0] += lanes.TERM_STATS_MAX_AGE_S
    assert memo.get(None, 1, "u") is first  # old, but the segments did not change
    assert calls == {"stamp": 2, "stats": 1}
    clock[0] += lanes.TERM_STATS_MAX_AGE_S / 2
    assert memo.get(None, 1, "u") is first  # the check renewed its age
    assert calls == {"stamp": 2, "stats": 1}
    stamp[0] = (11, 100)
    clock[0] += lanes.TERM_STATS_MAX_AGE_S
    fresh = memo.get(None, 1, "u")  # old and changed: recomputed
    assert fresh is not first and fresh.df == {"cup": 2}
    # users are kept apart, and the least recently used one leaves first
    memo.get(None, 1, "v")
    memo.get(None, 1, "w")
    assert calls["stats"] == 4
    memo.get(None, 1, "u")
    assert calls["stats"] == 5
