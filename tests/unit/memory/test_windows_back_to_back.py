"""Sessions uploaded back to back (a device's backlog after a day offline): the flow reads the
frames, audio and control topics independently, so one session's audio may arrive after the
next session's first frame. Its windows must still get that audio."""

from __future__ import annotations

import logging
import math
import pickle
import random
from datetime import UTC, datetime

import pytest

from worldmm.memory.windows import (
    BaseWindow,
    Item,
    LateItem,
    Pause,
    PausedItem,
    SessionEnd,
    WindowCascade,
    WindowConfig,
)

S = 1000
T0 = int(datetime(2025, 3, 12, 15, 0, tzinfo=UTC).timestamp() * S)  # on the hour
HOUR = 3600 * S


def test_audio_read_after_the_next_sessions_frames_stays_in_its_window() -> None:
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=5, session_end_grace_s=math.inf))
    frames = [Item("frames", f"f{i}", "s0", T0 + i * S, T0 + i * S) for i in range(15)]
    audio = [Item("audio", f"a{i}", "s0", T0 + i * 5 * S, T0 + (i + 1) * 5 * S) for i in range(3)]
    end = SessionEnd("s0", T0 + 15 * S, (("frames", T0 + 14 * S), ("audio", T0 + 15 * S)))
    out = state.ingest(frames, 1.0)
    out += state.ingest([end], 1.1)  # the control topic, read ahead of the audio topic
    out += state.ingest([Item("frames", "g0", "s1", T0 + 5 * HOUR, T0 + 5 * HOUR)], 1.2)
    out += state.ingest(audio, 1.3)  # the audio topic catches up
    assert not [e for e in out if isinstance(e, LateItem)]
    (base,) = [e for e in out if isinstance(e, BaseWindow) and e.session_id == "s0"]
    assert sorted(i.key for i in base.items if i.kind == "audio") == ["a0", "a1", "a2"]


def _session(
    sid: str, start_ms: int, seconds: int = 75
) -> tuple[list[Item], list[Item], SessionEnd]:
    """A session's frames (one per 2 s), audio (5 s chunks) and its end record."""
    frames = [
        Item("frames", f"{sid}f{t}", sid, start_ms + t * S, start_ms + t * S)
        for t in range(0, seconds, 2)
    ]
    audio = [
        Item("audio", f"{sid}a{t}", sid, start_ms + t * S, start_ms + (t + 5) * S)
        for t in range(0, seconds, 5)
    ]
    last = (("frames", frames[-1].end_ms), ("audio", audio[-1].end_ms))
    return frames, audio, SessionEnd(sid, start_ms + seconds * S, last)


def _contents(events: list) -> dict[tuple[int, int], list[str]]:
    """Each closed 30 s window's captures; a window closed twice fails here."""
    out: dict[tuple[int, int], list[str]] = {}
    for e in events:
        if isinstance(e, BaseWindow):
            assert e.wid not in out, f"window {e.wid} closed twice"
            out[e.wid] = sorted(i.key for i in e.items)
    return out


BACKLOG = [_session(f"s{k}", T0 + k * HOUR) for k in range(3)]


def _expected() -> dict[tuple[int, int], list[str]]:
    out: dict[tuple[int, int], list[str]] = {}
    for frames, audio, _ in BACKLOG:
        for item in frames + audio:
            for start in item.windows():
                out.setdefault((30, start), []).append(item.key)
    return {wid: sorted(keys) for wid, keys in out.items()}


def test_backlog_of_three_sessions_read_topic_by_topic_loses_nothing() -> None:
    """Control first, then every session's frames, then every session's audio: the worst
    order, each session's audio behind the two later sessions' frames."""
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=5))
    out = state.ingest([end for *_, end in BACKLOG], 1.0)
    out += state.ingest([f for frames, _, _ in BACKLOG for f in frames], 1.1)
    # s0 still misses its audio: the later sessions' frames wait behind its end
    assert [x.key for x in state.held.values()] == [
        f.key for frames, _, _ in BACKLOG[1:] for f in frames
    ]
    assert not _contents(out)  # nothing closed: every session still misses its audio
    for k, (_, audio, _) in enumerate(BACKLOG):
        out += state.ingest(audio, 1.2 + k / 10)
        # each session closes as soon as its audio is in, the next still waits for its own
        assert {e.session_id for e in out if isinstance(e, BaseWindow)} == {
            f"s{j}" for j in range(k + 1)
        }
    assert not [e for e in out if isinstance(e, LateItem)]
    assert _contents(out) == _expected()
    assert not state.held and not state.pending_ends and not state.open_base


@pytest.mark.parametrize("seed", range(12))
def test_backlog_interleaved_at_random_across_topics_loses_nothing(seed: int) -> None:
    """Each topic keeps its order, the topics are read in random bites against each other
    (the control topic ahead, as it is small); every capture lands in its window, once."""
    rng = random.Random(seed)
    topics = [[f for fs, _, _ in BACKLOG for f in fs], [a for _, au, _ in BACKLOG for a in au]]
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=5))
    now = 1.0
    out = state.ingest([end for *_, end in BACKLOG], now)
    while any(topics):
        topic = rng.choice([t for t in topics if t])
        bite = rng.randint(1, 12)
        batch, topic[:] = topic[:bite], topic[bite:]
        now += 0.01
        out += state.ingest(batch, now)
    out += state.eof(now)
    assert not [e for e in out if isinstance(e, LateItem)]
    assert _contents(out) == _expected()
    assert not state.held and not state.pending_ends


def test_snapshot_while_input_is_held_restores_without_loss_or_duplicates() -> None:
    """A restart from a snapshot taken while the next sessions wait behind an end: the
    restored state holds them (pickled, as Bytewax keeps it), a redelivered one is held
    once, and the windows are those of an uninterrupted run."""
    frames = [f for fs, _, _ in BACKLOG for f in fs]
    audio = [a for _, au, _ in BACKLOG for a in au]
    before = [[end for *_, end in BACKLOG], frames[:60], frames[60:]]
    after = [audio[:20], audio[20:]]

    live = WindowCascade("u1", WindowConfig(allowed_lateness_s=5))
    uninterrupted = [e for i, b in enumerate(before + after) for e in live.ingest(b, 1 + i / 10)]

    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=5))
    out = [e for i, b in enumerate(before) for e in state.ingest(b, 1 + i / 10)]
    assert len(state.held) == len(frames) - len(BACKLOG[0][0])
    restored: WindowCascade = pickle.loads(pickle.dumps(state.copy()))
    assert restored.held == state.held
    del state  # the crash
    out += restored.ingest(frames[-3:], 1.25)  # at-least-once: records read again
    for i, b in enumerate(after):
        out += restored.ingest(b, 1.3 + i / 10)
    assert _contents(out) == _contents(uninterrupted) == _expected()
    assert not [e for e in out if isinstance(e, LateItem)]


def test_held_input_is_capped_then_the_end_applies_and_stragglers_are_late(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Audio of s0 that never comes: the next session's frames wait behind its end only up
    to the cap; then the end applies (logged, counted), nothing held is lost, and what
    arrives of s0 afterwards is late as before."""
    config = WindowConfig(allowed_lateness_s=5, session_end_grace_s=math.inf, max_held=4)
    state = WindowCascade("u1", config)
    (f0, a0, end0), (f1, _, _) = BACKLOG[0], BACKLOG[1]
    out = state.ingest(f0 + [end0], 1.0)
    out += state.ingest(f1[:4], 1.1)
    assert len(state.held) == 4 and state.forced_ends == 0 and not _contents(out)
    out += state.ingest(f1[:4], 1.15)  # redelivered: held once, the cap is not reached
    assert len(state.held) == 4 and state.forced_ends == 0
    with caplog.at_level(logging.WARNING, logger="worldmm.memory.windows"):
        out += state.ingest(f1[4:6], 1.2)
    assert state.forced_ends == 1 and "held_input_cap user=u1 session=s0" in caplog.text
    assert not state.held and not state.pending_ends
    closed = _contents(out)
    assert {wid for wid in closed if wid[1] < T0 + HOUR} == {
        (30, T0 + k * 30 * S) for k in range(3)
    }
    assert all(k.startswith("s0f") for wid, keys in closed.items() for k in keys)
    assert {i.key for w in state.open_base.values() for i in w.values()} == {f.key for f in f1[:6]}
    late = state.ingest(a0[:2], 1.3)
    assert [e.item.key for e in late if isinstance(e, LateItem)] == ["s0a0", "s0a5"]


def test_a_pause_of_the_next_session_waits_with_its_captures() -> None:
    """The control topic brings s0's end and s1's privacy pause before s0's audio: the pause
    waits behind the end too, so s0's audio is kept and s1's paused frames are dropped."""
    (f0, a0, end0), (f1, _, _) = BACKLOG[0], BACKLOG[1]
    pause = Pause("s1", T0 + HOUR + 10 * S)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=5, session_end_grace_s=math.inf))
    out = state.ingest([end0, pause], 1.0)
    out += state.ingest(f0 + f1, 1.1)
    out += state.ingest(a0, 1.2)
    assert not [e for e in out if isinstance(e, LateItem)]
    s0 = [e for e in out if isinstance(e, BaseWindow) and e.session_id == "s0"]
    assert sorted(i.key for w in s0 for i in w.items if i.kind == "audio") == sorted(
        a.key for a in a0
    )
    # s1's frames after the pause are dropped, or wait for a resume (none comes): never kept
    dropped = {e.item.key for e in out if isinstance(e, PausedItem)}
    waiting = {i.key for i in state.pause_held}
    assert dropped | waiting == {f.key for f in f1 if f.ts_ms >= pause.ts_ms}
    kept = {i.key for e in out if isinstance(e, BaseWindow) for i in e.items}
    assert not kept & (dropped | waiting)


def test_a_control_record_never_shows_an_end_to_be_over() -> None:
    """An end without ``last_ms`` (an older gateway) applies at the first capture after it,
    not at the next session's pause record, which the control topic brings just as early."""
    (f0, _, end0), (f1, _, _) = BACKLOG[0], BACKLOG[1]
    legacy = SessionEnd("s0", end0.ts_ms)
    state = WindowCascade("u1", WindowConfig(allowed_lateness_s=5, session_end_grace_s=math.inf))
    out = state.ingest([legacy, Pause("s1", T0 + HOUR + 10 * S)], 1.0)
    out += state.ingest(f0, 1.1)
    assert not [e for e in out if isinstance(e, LateItem)] and state.pending_ends
    out += state.ingest(f1[:1], 1.2)
    assert sorted(k for w in _contents(out).values() for k in w) == sorted(f.key for f in f0)
    assert not state.pending_ends and not state.held and state.paused_since == T0 + HOUR + 10 * S
