"""The lexical lane's term statistics: counted whole once, then served from memory while young,
brought up to date with what changed when old, and recounted whole in the background."""

from __future__ import annotations

import numpy as np
import pytest

from worldmm.memory.retrieval import frequencies
from worldmm.store import term_stats as ts


def _stats(df: dict[str, int], ends: list[float], scale_docs: dict[int, int]) -> ts.TermStats:
    return ts.TermStats(
        docs=sum(scale_docs.values()),
        df=df,
        mean_length={s: 4.0 for s in scale_docs},
        base_ends=np.array(ends, dtype=np.float64),
        scale_docs=scale_docs,
    )


class FakeStore:
    """What the store holds: segments (id -> lexemes, end), some pending."""

    def __init__(self) -> None:
        self.segments: dict[int, tuple[list[str], float]] = {}
        self.pending: set[int] = set()
        self.reads: list[ts.Coverage] = []  # the ``before`` of every count

    def coverage(self, conn, user_id) -> ts.Coverage:
        top = max(self.segments, default=0)
        return ts.Coverage(top, tuple(sorted(i for i in self.pending if i <= top)))

    def read_since(self, conn, user_id, before, now) -> ts.TermStats:
        self.reads.append(before)
        ids = [
            i
            for i in self.segments
            if i not in now.pending and i <= now.upto and (i > before.upto or i in before.pending)
        ]
        df: dict[str, int] = {}
        for i in ids:
            for w in set(self.segments[i][0]):
                df[w] = df.get(w, 0) + 1
        return _stats(df, sorted(self.segments[i][1] for i in ids), {30: len(ids)})

    def read_all(self, conn, user_id):
        now = self.coverage(conn, user_id)
        return self.read_since(conn, user_id, ts.NOTHING, now), now


@pytest.fixture
def world(monkeypatch):
    clock = [1000.0]
    store = FakeStore()
    monkeypatch.setattr(frequencies.time, "monotonic", lambda: clock[0])
    for name in ("coverage", "read_since", "read_all"):
        monkeypatch.setattr(frequencies.ts, name, getattr(store, name))
    return clock, store


def test_counted_once_then_only_what_changed(world) -> None:
    clock, store = world
    store.segments = {1: (["cup"], 30.0), 2: (["cup", "tea"], 60.0), 3: (["tea"], 90.0)}
    store.pending = {3}
    memo = frequencies.TermStatsMemo(max_users=2, spawn=lambda job: job())
    first = memo.get(None, "db", "u")
    assert first.df == {"cup": 2, "tea": 1} and store.reads == [ts.NOTHING]
    store.segments[4] = (["kettle"], 120.0)
    clock[0] += frequencies.TERM_STATS_CHECK_S / 2
    assert memo.get(None, "db", "u") is first  # young: the store is not asked
    clock[0] += frequencies.TERM_STATS_CHECK_S
    store.pending.clear()  # the pending window completed, and a new one was written
    second = memo.get(None, "db", "u")
    assert store.reads[-1] == ts.Coverage(3, (3,))  # only what that count had not seen
    assert second.df == {"cup": 2, "tea": 2, "kettle": 1}
    assert second.docs == 4 and list(second.base_ends) == [30.0, 60.0, 90.0, 120.0]
    clock[0] += frequencies.TERM_STATS_CHECK_S
    assert memo.get(None, "db", "u") is second and len(store.reads) == 2  # nothing new


def test_deleted_top_recounts_and_an_old_copy_is_recounted_whole(world) -> None:
    clock, store = world
    store.segments = {1: (["cup"], 30.0), 2: (["tea"], 60.0)}
    spawned = []
    memo = frequencies.TermStatsMemo(spawn=spawned.append)
    memo.get(None, "db", "u")
    del store.segments[2]  # forgotten: the top id went down, so the copy is not trusted
    clock[0] += frequencies.TERM_STATS_CHECK_S
    assert memo.get(None, "db", "u").df == {"cup": 1} and store.reads[-1] == ts.NOTHING
    store.segments[1] = (["kettle"], 30.0)  # edited in place: invisible to the delta
    store.segments[5] = (["cup"], 150.0)
    clock[0] += frequencies.TERM_STATS_RECOUNT_S
    stale = memo.get(None, "db", "u")
    assert stale.df == {"cup": 2} and len(spawned) == 1  # served, recount started once
    clock[0] += frequencies.TERM_STATS_CHECK_S
    memo.get(None, "db", "u")
    assert len(spawned) == 1
    memo._recount(_FakeDb(), (id("db"), "u"), "u")  # what the background thread runs
    assert memo.get(None, "db", "u").df == {"kettle": 1, "cup": 1}


def test_users_are_kept_apart_and_the_least_recent_leaves_first(world) -> None:
    _clock, store = world
    store.segments = {1: (["cup"], 30.0)}
    memo = frequencies.TermStatsMemo(max_users=2)
    for user in ("u", "v", "w"):
        memo.get(None, "db", user)
    assert len(store.reads) == 3
    memo.get(None, "db", "v")
    assert len(store.reads) == 3  # kept
    memo.get(None, "db", "u")
    assert len(store.reads) == 4  # evicted by w, counted again


def test_merge_adds_counts_weighs_means_and_keeps_ends_sorted() -> None:
    a = ts.TermStats(2, {"cup": 2}, {30: 4.0}, np.array([10.0, 30.0]), {30: 2})
    b = ts.TermStats(
        2, {"cup": 1, "tea": 1}, {30: 1.0, 180: 8.0}, np.array([20.0]), {30: 1, 180: 1}
    )
    m = ts.merge(a, b)
    assert m.docs == 4 and m.df == {"cup": 3, "tea": 1}
    assert m.mean_length == {30: 3.0, 180: 8.0} and m.scale_docs == {30: 3, 180: 1}
    assert list(m.base_ends) == [10.0, 20.0, 30.0]


class _FakeDb:
    def connection(self):
        from contextlib import nullcontext

        return nullcontext(None)
