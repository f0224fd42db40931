"""Privacy pauses in the window cascade: captures inside a pause are dropped (and reported),
whichever order the pause record and the captures arrive in; windows inside say "paused"."""

from __future__ import annotations

from tests.fixtures.clocks import ManualClock
from tests.fixtures.window_streams import HOUR0, WALL0, S, audio, frame, of, stream
from worldmm.memory.windows import (
    BaseWindow,
    CoarseWindow,
    Pause,
    PausedItem,
    SessionEnd,
    WindowCascade,
)


def windows(events) -> dict[int, BaseWindow]:
    return {w.start_ms: w for w in of(events, BaseWindow)}


def test_captures_inside_a_pause_are_dropped_and_its_windows_say_paused() -> None:
    clock, state = ManualClock(WALL0), WindowCascade("u")
    out = stream(state, clock, HOUR0, HOUR0 + 60 * S)  # first minute recorded
    out += state.ingest([Pause("s1", HOUR0 + 60 * S)], clock.advance(0))
    out += stream(state, clock, HOUR0 + 60 * S, HOUR0 + 150 * S)  # glasses keep sending
    out += state.ingest([Pause("s1", HOUR0 + 150 * S, resume=True)], clock.advance(0))
    out += stream(state, clock, HOUR0 + 150 * S, HOUR0 + 240 * S)
    out += state.ingest([SessionEnd("s1", HOUR0 + 240 * S)], clock.advance(10))
    out += state.tick(clock.advance(60))

    dropped = of(out, PausedItem)
    assert dropped and all(HOUR0 + 55 * S <= p.item.ts_ms < HOUR0 + 150 * S for p in dropped)
    by_start = windows(out)
    for start in (60, 90, 120):  # the pause's windows: empty, paused
        w = by_start[HOUR0 + start * S]
        assert w.paused and w.items == ()
    for start in (0, 30, 150, 180, 210):
        w = by_start[HOUR0 + start * S]
        assert not w.paused and w.items
        assert all(not HOUR0 + 60 * S <= i.ts_ms < HOUR0 + 150 * S for i in w.items)
    kept = [i for w in of(out, BaseWindow) for i in w.items]
    assert not {i.key for i in kept} & {p.item.key for p in dropped}


def test_a_pause_read_after_its_captures_still_drops_them() -> None:
    """The control topic may be read behind the frames: captures already held in open
    windows go when the pause record arrives."""
    clock, state = ManualClock(WALL0), WindowCascade("u")
    held = [frame(HOUR0 + t * S) for t in range(0, 25, 5)]
    out = state.ingest([*held, audio(HOUR0 + 8 * S)], clock.advance(1))
    out += state.ingest([Pause("s1", HOUR0 + 10 * S)], clock.advance(1))
    # the audio chunk [8 s, 13 s) straddles the pause's start: it goes whole, at once; the
    # frames after the start wait for the resume, which here never comes
    assert [p.item.ts_ms for p in of(out, PausedItem)] == [HOUR0 + 8 * S]
    assert [i.ts_ms for i in state.pause_held] == [HOUR0 + t * S for t in (10, 15, 20)]
    out += state.ingest([SessionEnd("s1", HOUR0 + 25 * S)], clock.advance(10))
    out += state.tick(clock.advance(60))
    assert sorted(p.item.ts_ms for p in of(out, PausedItem)) == [
        HOUR0 + t * S for t in (8, 10, 15, 20)
    ]
    (w,) = of(out, BaseWindow)
    assert [i.ts_ms for i in w.items] == [HOUR0, HOUR0 + 5 * S] and not w.paused


def test_a_pause_with_no_resume_ends_at_the_session_end_and_fills_its_windows() -> None:
    """The glasses may stop sending during a pause: every window of its span is still
    opened, so the day shows a paused gap, not missing data; a coarse window whose children
    were all paused is itself paused (its builder sees the children's status)."""
    clock, state = ManualClock(WALL0), WindowCascade("u")
    out = stream(state, clock, HOUR0, HOUR0 + 30 * S)
    out += state.ingest([Pause("s1", HOUR0 + 30 * S)], clock.advance(0))
    out += state.ingest([SessionEnd("s1", HOUR0 + 180 * S)], clock.advance(1))
    out += state.tick(clock.advance(60))
    by_start = windows(out)
    assert not by_start[HOUR0].paused
    assert [s for s, w in sorted(by_start.items()) if w.paused] == [
        HOUR0 + t * S for t in (30, 60, 90, 120, 150)
    ]
    assert state.paused_since is None  # ended with the session
    (three,) = [c for c in of(out, CoarseWindow) if c.scale_s == 180]
    assert len(three.children) == 6
    # a new session is not paused
    out = state.ingest([frame(HOUR0 + 3600 * S, "s2")], clock.advance(1))
    assert not of(out, PausedItem)


def test_repeated_and_stray_records_change_nothing_and_the_state_survives_a_snapshot() -> None:
    clock, state = ManualClock(WALL0), WindowCascade("u")
    assert state.ingest([Pause("s1", HOUR0, resume=True)], clock.advance(1)) == []  # stray
    state.ingest([Pause("s1", HOUR0 + 10 * S)], clock.advance(1))
    state.ingest([Pause("s1", HOUR0 + 20 * S)], clock.advance(1))  # repeated: first counts
    copy = state.copy()
    assert copy.paused_since == HOUR0 + 10 * S
    out = copy.ingest([audio(HOUR0 + 12 * S), frame(HOUR0 + 5 * S)], clock.advance(1))
    # after the open pause's start: waits for the resume (it may have been read late)
    assert not of(out, PausedItem) and [i.ts_ms for i in copy.pause_held] == [HOUR0 + 12 * S]
    assert state.open_base == {} and state.pause_held == []  # the copy is independent


def test_captures_read_before_their_resume_are_kept() -> None:
    """Frames and control records come from different topics: captures past the resume can
    be read before the resume record. They wait for it and are kept, not dropped."""
    clock, state = ManualClock(WALL0), WindowCascade("u")
    out = stream(state, clock, HOUR0, HOUR0 + 30 * S)
    out += state.ingest([Pause("s1", HOUR0 + 30 * S)], clock.advance(0))
    out += stream(state, clock, HOUR0 + 30 * S, HOUR0 + 90 * S)  # resume not read yet
    assert not [p for p in of(out, PausedItem) if p.item.ts_ms >= HOUR0 + 60 * S]
    out += state.ingest([Pause("s1", HOUR0 + 60 * S, resume=True)], clock.advance(0))
    out += state.ingest([SessionEnd("s1", HOUR0 + 90 * S)], clock.advance(10))
    out += state.tick(clock.advance(60))
    dropped = of(out, PausedItem)
    assert dropped and all(HOUR0 + 30 * S <= p.item.ts_ms < HOUR0 + 60 * S for p in dropped)
    by_start = windows(out)
    assert by_start[HOUR0 + 30 * S].paused and by_start[HOUR0 + 30 * S].items == ()
    after = by_start[HOUR0 + 60 * S]
    assert not after.paused and after.items
    assert {i.ts_ms for i in after.items if i.kind == "frames"} == {
        HOUR0 + t * S for t in range(60, 90, 5)
    }


def test_captures_read_before_the_pause_and_its_resume_are_kept_after_it() -> None:
    """The frames topic read ahead of the control topic: every capture of 90 s is in open
    windows when the pause (30 s) and its resume (60 s) are read. Those after the resume are
    kept in their window; before, the open pause dropped everything after its start (a
    flow run lost frames of the window after a pause this way)."""
    clock, state = ManualClock(WALL0), WindowCascade("u")
    out = state.ingest([frame(HOUR0 + t * S) for t in range(90)], clock.advance(1))
    out += state.ingest([Pause("s1", HOUR0 + 30 * S)], clock.advance(1))
    assert not of(out, PausedItem) and len(state.pause_held) == 60
    out += state.ingest([audio(HOUR0 + t * S) for t in range(0, 90, 5)], clock.advance(1))
    # the held frames hold their windows: nothing from the pause's start on has closed
    assert all(w.start_ms < HOUR0 + 30 * S for w in of(out, BaseWindow))
    out += state.ingest([Pause("s1", HOUR0 + 60 * S, resume=True)], clock.advance(1))
    out += state.ingest([SessionEnd("s1", HOUR0 + 90 * S)], clock.advance(1))
    out += state.tick(clock.advance(60))
    dropped = {p.item.key for p in of(out, PausedItem)}
    assert {p.item.ts_ms for p in of(out, PausedItem)} == {HOUR0 + t * S for t in range(30, 60)}
    by_start = windows(out)
    assert by_start[HOUR0 + 30 * S].paused and by_start[HOUR0 + 30 * S].items == ()
    for start in (0, 60):
        w = by_start[HOUR0 + start * S]
        assert not w.paused
        assert {i.ts_ms for i in w.items if i.kind == "frames"} == {
            HOUR0 + t * S for t in range(start, start + 30)
        }
        assert not {i.key for i in w.items} & dropped
