"""The window cascade driven by a fake clock: which windows close when, what they merge."""

from __future__ import annotations

import math

import pytest

from tests.fixtures.clocks import ManualClock
from tests.fixtures.window_streams import HOUR0, WALL0, S, audio, frame, of, stream
from worldmm.memory.windows import (
    BaseWindow,
    CoarseWindow,
    LateItem,
    SessionEnd,
    WindowCascade,
    WindowConfig,
    align,
    children_of,
    parent_of,
)


def test_hierarchy_arithmetic() -> None:
    ten = HOUR0 + 10 * 60 * S
    assert align(ten + 7 * 60 * S, 180) == ten + 6 * 60 * S
    # the last minute of a 10 min window has no 3 min window: it clamps to the third one
    assert align(ten + 9 * 60 * S + 5 * S, 180) == ten + 6 * 60 * S
    assert parent_of((30, ten + 90 * S)) == (180, ten)
    assert parent_of((30, ten + 540 * S)) == (600, ten)
    assert parent_of((30, ten + 570 * S)) == (600, ten)
    assert parent_of((180, ten + 360 * S)) == (600, ten)
    assert parent_of((600, ten)) == (3600, HOUR0)
    assert parent_of((3600, HOUR0)) is None
    assert children_of((600, ten)) == [
        (180, ten),
        (180, ten + 180 * S),
        (180, ten + 360 * S),
        (30, ten + 540 * S),
        (30, ten + 570 * S),
    ]
    # every 30 s window of an hour reaches the hour through parents
    for k in range(120):
        wid = (30, HOUR0 + k * 30 * S)
        chain = []
        while wid is not None:
            chain.append(wid)
            wid = parent_of(wid)
        assert chain[-1] == (3600, HOUR0)
        for child, parent in zip(chain, chain[1:], strict=False):
            assert child in children_of(parent)


def test_full_hour_cascade_with_fake_clock() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=10, idle_s=60))
    events = stream(state, clock, HOUR0, HOUR0 + 3600 * S + 60 * S)

    bases = of(events, BaseWindow)
    coarse = of(events, CoarseWindow)
    assert of(events, LateItem) == []
    # the first hour plus the windows the next minute's data pushed the watermark past
    hour_bases = [b for b in bases if b.start_ms < HOUR0 + 3600 * S]
    assert [b.start_ms for b in hour_bases] == [HOUR0 + k * 30 * S for k in range(120)]
    assert all(len(b.items) == 12 and not b.partial for b in hour_bases)  # 6 frames + 6 audio
    by_scale = {s: [c for c in coarse if c.scale_s == s] for s in (180, 600, 3600)}
    assert len(by_scale[180]) == 18 and len(by_scale[600]) == 6 and len(by_scale[3600]) == 1
    for c in coarse:
        assert list(c.children) == children_of(c.wid) and not c.partial
    # every window is emitted after all of its children
    position = {(e.wid if not isinstance(e, LateItem) else None): i for i, e in enumerate(events)}
    for c in coarse:
        assert all(position[child] < position[c.wid] for child in c.children)
    # the hour closes right after its last 10 min window, not before its last 30 s window
    hour = by_scale[3600][0]
    assert position[hour.wid] == position[(600, HOUR0 + 3000 * S)] + 1
    assert position[(30, HOUR0 + 3570 * S)] < position[hour.wid]


def test_windows_close_on_event_time_with_lateness() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=10, idle_s=60))
    out = state.ingest([frame(HOUR0), audio(HOUR0)], clock.advance(1))
    # progress: frames 39 s, audio 40 s (its end) -> watermark 29 s: window [0, 30) stays open
    out += state.ingest([frame(HOUR0 + 39 * S), audio(HOUR0 + 35 * S)], clock.advance(1))
    assert out == []
    out = state.ingest([frame(HOUR0 + 40 * S), audio(HOUR0 + 40 * S)], clock.advance(1))
    assert [b.start_ms for b in of(out, BaseWindow)] == [HOUR0]


def test_lagging_stream_holds_windows_then_idle_releases() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=0, idle_s=20))
    state.ingest([audio(HOUR0, 1 * S)], clock.advance(1))
    # frames race ahead (another topic read faster): audio's progress holds the window open
    out = state.ingest([frame(HOUR0 + k * S) for k in range(0, 90, 3)], clock.advance(1))
    assert of(out, BaseWindow) == []
    # the lagging audio catches up: its chunks go in the open windows, not to late
    out = state.ingest([audio(HOUR0 + k * S, S) for k in range(1, 61)], clock.advance(1))
    closed = of(out, BaseWindow)
    assert [b.start_ms for b in closed] == [HOUR0, HOUR0 + 30 * S]
    assert {i.kind for i in closed[0].items} == {"frames", "audio"}
    assert of(out, LateItem) == []
    # audio goes quiet (muted) while frames go on: after idle_s (wall) frames alone count
    closed_at = []
    for k in range(5):
        out = state.ingest([frame(HOUR0 + (90 + 3 * k) * S)], clock.advance(5))
        closed_at += [(k, b.start_ms) for b in of(out, BaseWindow)]
    assert closed_at == [(3, HOUR0 + 60 * S)]


def test_all_streams_idle_event_time_follows_wall_time() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=10, idle_s=5))
    state.ingest([frame(HOUR0 + 2 * S), audio(HOUR0 + 2 * S, S)], clock.advance(1))
    assert state.tick(clock.advance(4)) == []
    wake = state.next_wake(clock.now)
    assert wake is not None
    clock.now = wake
    assert state.tick(clock.now) == []
    # both idle: watermark = 3 s - 10 s + elapsed; the window ends at 30 s
    wake = state.next_wake(clock.now)
    assert wake == pytest.approx(clock.now + (30 - (3 - 10 + 5)))
    out = state.tick(wake)
    assert [b.start_ms for b in of(out, BaseWindow)] == [HOUR0]


def test_session_end_flushes_partial_windows_twelve_minutes() -> None:
    """The e2e shape: 12 minutes from a 10 min boundary, then a session end."""
    clock = ManualClock(WALL0)
    start = HOUR0 + 20 * 60 * S
    state = WindowCascade(
        "u1", WindowConfig(allowed_lateness_s=10, idle_s=60, session_end_grace_s=3)
    )
    events = stream(state, clock, start, start + 720 * S)
    events += state.ingest([SessionEnd("s1", start + 720 * S)], clock.advance(0.1))
    assert state.tick(clock.advance(1)) == []  # grace not over
    assert state.next_wake(clock.now) == pytest.approx(clock.now + 2)
    events += state.tick(clock.advance(2))

    bases = of(events, BaseWindow)
    coarse = of(events, CoarseWindow)
    assert len(bases) == 24 and not any(b.partial for b in bases)
    threes = [c for c in coarse if c.scale_s == 180]
    tens = [c for c in coarse if c.scale_s == 600]
    hours = [c for c in coarse if c.scale_s == 3600]
    assert [c.partial for c in threes] == [False, False, False, True]
    assert len(threes[-1].children) == 4
    assert [c.partial for c in tens] == [False, True]
    assert list(tens[0].children) == children_of(tens[0].wid)
    assert tens[1].children == (threes[-1].wid,)
    assert len(hours) == 1 and hours[0].partial and len(hours[0].children) == 2
    assert state.open_base == {} and state.closed_children == {}


def test_session_end_mid_window_and_late_items() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade(
        "u1", WindowConfig(allowed_lateness_s=0, idle_s=60, session_end_grace_s=0)
    )
    state.ingest([frame(HOUR0 + S), audio(HOUR0 + S)], clock.advance(1))
    out = state.ingest([frame(HOUR0 + 40 * S), SessionEnd("s1", HOUR0 + 45 * S)], clock.now)
    out += state.tick(clock.advance(1))
    bases = of(out, BaseWindow)
    assert [(b.start_ms, b.partial) for b in bases] == [(HOUR0, False), (HOUR0 + 30 * S, True)]
    # a straggler for a flushed window is reported, not silently lost
    out = state.ingest([frame(HOUR0 + 44 * S)], clock.advance(1))
    late = of(out, LateItem)
    assert len(late) == 1 and late[0].window_start_ms == HOUR0 + 30 * S
    assert state.late_count == 1


def test_end_is_applied_when_the_next_session_starts() -> None:
    state = WindowCascade(
        "u1", WindowConfig(allowed_lateness_s=0, idle_s=60, session_end_grace_s=99)
    )
    state.ingest([frame(HOUR0 + S), audio(HOUR0 + S), SessionEnd("s1", HOUR0 + 10 * S)], 1.0)
    out = state.ingest([frame(HOUR0 + 100 * S, session="s2")], 2.0)
    bases = of(out, BaseWindow)
    assert [(b.start_ms, b.partial, b.session_id) for b in bases] == [(HOUR0, True, "s1")]
    assert (HOUR0 + 90 * S) in state.open_base


def test_end_read_before_its_session_waits_for_the_data() -> None:
    """A consumer catching up reads the control topic far ahead of the frames: the end must
    not flush (and turn the whole session late) before the session's captures arrive."""
    clock = ManualClock(WALL0)
    state = WindowCascade(
        "u1", WindowConfig(allowed_lateness_s=0, idle_s=30, session_end_grace_s=2)
    )
    last = (("audio", HOUR0 + 65 * S), ("frames", HOUR0 + 64 * S))
    assert state.ingest([SessionEnd("s1", HOUR0 + 65 * S, last)], clock.now) == []
    assert state.tick(clock.advance(10)) == []  # past the grace: still waiting for the data
    assert state.next_wake(clock.now) == pytest.approx(clock.now + 20)
    out = []
    for t in range(0, 65, 5):
        out += state.ingest([frame(HOUR0 + t * S), audio(HOUR0 + t * S)], clock.advance(0.1))
    out += state.ingest([frame(HOUR0 + 64 * S)], clock.advance(0.1))  # the last capture
    assert not of(out, LateItem) and state.late_count == 0
    bases = of(out, BaseWindow)
    assert [(b.start_ms, b.partial) for b in bases] == [
        (HOUR0, False),
        (HOUR0 + 30 * S, False),
        (HOUR0 + 60 * S, True),
    ]
    assert len([i for i in bases[-1].items if i.kind == "frames"]) == 2  # 60 s and 64 s
    assert state.pending_ends == [] and state.open_base == {}


def test_end_whose_data_never_comes_gives_up_after_idle() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade(
        "u1", WindowConfig(allowed_lateness_s=0, idle_s=30, session_end_grace_s=2)
    )
    state.ingest([frame(HOUR0 + S), audio(HOUR0 + S)], clock.now)
    last = (("audio", HOUR0 + 6 * S), ("frames", HOUR0 + 20 * S))  # frames 2..20 s are lost
    state.ingest([SessionEnd("s1", HOUR0 + 20 * S, last)], clock.advance(1))
    state.tick(clock.advance(29.5))
    assert len(state.pending_ends) == 1  # past the 2 s grace, still waiting for the frames
    state.tick(clock.advance(1))
    assert state.pending_ends == [] and state.open_base == {}
    late = state.ingest([frame(HOUR0 + 2 * S)], clock.advance(1))
    assert len(of(late, LateItem)) == 1


def test_ends_read_ahead_of_two_sessions_each_wait_for_their_own() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade(
        "u1", WindowConfig(allowed_lateness_s=0, idle_s=60, session_end_grace_s=1)
    )
    ends = [
        SessionEnd("s1", HOUR0 + 40 * S, (("frames", HOUR0 + 40 * S),)),
        SessionEnd("s2", HOUR0 + 130 * S, (("frames", HOUR0 + 130 * S),)),
    ]
    assert state.ingest(ends, clock.now) == []
    out = state.ingest([frame(HOUR0 + t * S) for t in (0, 20, 40)], clock.advance(5))
    assert [(b.start_ms, b.session_id) for b in of(out, BaseWindow)] == [
        (HOUR0, "s1"),
        (HOUR0 + 30 * S, "s1"),
    ]
    assert [e for e, _ in state.pending_ends] == ends[1:]
    out = state.ingest([frame(HOUR0 + t * S, "s2") for t in (100, 130)], clock.advance(5))
    assert [(b.start_ms, b.session_id) for b in of(out, BaseWindow)] == [
        (HOUR0 + 90 * S, "s2"),
        (HOUR0 + 120 * S, "s2"),
    ]
    assert not of(out, LateItem) and state.pending_ends == []


def test_a_bounded_run_leaves_ends_to_the_data_or_eof() -> None:
    clock = ManualClock(WALL0)
    config = WindowConfig(allowed_lateness_s=0, idle_s=1e6, session_end_grace_s=math.inf)
    state = WindowCascade("u1", config)
    state.ingest([frame(HOUR0 + S), audio(HOUR0 + S)], clock.now)
    state.ingest([SessionEnd("s1", HOUR0 + 10 * S)], clock.now)  # an end without last_ms
    assert state.tick(clock.advance(10_000)) == []
    assert math.isfinite(state.next_wake(clock.now))  # the idle timer, not the end
    out = state.eof(clock.now)
    assert [(b.start_ms, b.partial) for b in of(out, BaseWindow)] == [(HOUR0, True)]


def test_a_frame_at_the_end_time_belongs_to_the_session() -> None:
    state = WindowCascade(
        "u1", WindowConfig(allowed_lateness_s=0, idle_s=60, session_end_grace_s=9)
    )
    state.ingest([frame(HOUR0 + S), SessionEnd("s1", HOUR0 + 10 * S)], 1.0)
    out = state.ingest([frame(HOUR0 + 10 * S)], 2.0)  # read after the end, same capture time
    out += state.eof(3.0)
    bases = of(out, BaseWindow)
    assert [b.start_ms for b in bases] == [HOUR0]  # one window, not a second one for 10 s
    assert [i.ts_ms for i in bases[0].items] == [HOUR0 + S, HOUR0 + 10 * S]


def test_duplicates_are_merged_and_eof_keeps_open_tail() -> None:
    clock = ManualClock(WALL0)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=10, idle_s=60))
    batch = [frame(HOUR0 + k * S) for k in range(0, 70, 2)] + [audio(HOUR0, 70 * S)]
    out = state.ingest(batch + batch, clock.advance(1))  # redelivered input
    out += state.eof(clock.advance(1))
    bases = of(out, BaseWindow)
    assert [b.start_ms for b in bases] == [HOUR0]  # 70 s - 10 s: only the first is certain
    assert len([i for i in bases[0].items if i.kind == "frames"]) == 15
    assert set(state.open_base) == {HOUR0 + 30 * S, HOUR0 + 60 * S}


def test_audio_chunk_spanning_a_boundary_goes_to_both_windows() -> None:
    item = audio(HOUR0 + 28 * S, 4 * S)
    assert item.windows() == [HOUR0, HOUR0 + 30 * S]
    assert audio(HOUR0 + 25 * S, 5 * S).windows() == [HOUR0]


def test_snapshot_is_picklable_and_resumes() -> None:
    import pickle

    clock = ManualClock(WALL0)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=10, idle_s=60))
    stream(state, clock, HOUR0, HOUR0 + 100 * S)
    copy = pickle.loads(pickle.dumps(state))
    a = stream(state, clock, HOUR0 + 100 * S, HOUR0 + 200 * S)
    clock.now -= 100
    b = stream(copy, clock, HOUR0 + 100 * S, HOUR0 + 200 * S)
    assert a == b and len(of(a, CoarseWindow)) == 1
