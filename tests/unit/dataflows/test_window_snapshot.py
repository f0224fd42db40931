"""The window step's snapshot: a container copy equal to a deep copy, independent of the
live state (the step keeps mutating it after the snapshot was handed to Bytewax), and
holding references to captures, never their bytes."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from dataflows.window_step import WindowLogic
from worldmm.media.spool import WindowSpool
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.windows import Item, LateItem, Pause, SessionEnd, WindowCascade, WindowConfig

T0 = 1_767_225_600_000  # a 10 min boundary


def _state() -> WindowCascade:
    """A state with every field set: two closed windows, an open one, a late capture, a
    privacy pause that ended and one still open with a capture waiting for its resume, a
    session end still waiting for its captures and the next session's input held behind
    it."""
    w = WindowCascade("u1", WindowConfig(allowed_lateness_s=5.0))
    frames = [Item("frames", f"f{k}", "s1", T0 + k * 1000, T0 + k * 1000, k) for k in range(70)]
    audio = [Item("audio", f"a{k}", "s1", T0 + k * 5000, T0 + (k + 1) * 5000, k) for k in range(14)]
    w.ingest(frames + audio, now=100.0)  # the watermark (65 s) closes two windows
    w.ingest([Item("frames", "late", "s1", T0 + 500, T0 + 500, None)], now=100.5)
    pauses = [Pause("s1", T0 + 66_000), Pause("s1", T0 + 68_000, resume=True)]
    w.ingest([*pauses, Pause("s1", T0 + 69_500)], now=100.7)
    # a capture after the open pause's start waits for its resume
    w.ingest([Item("frames", "f_after", "s1", T0 + 69_800, T0 + 69_800, 70)], now=100.8)
    w.ingest([SessionEnd("s1", T0 + 200_000, (("frames", T0 + 200_000),))], now=101.0)
    # the next session's audio, read before this one's last frames: held behind the end
    w.ingest([Item("audio", "next", "s2", T0 + 300_000, T0 + 305_000, None)], now=101.5)
    w.forced_ends = 1  # as after an earlier backlog passed the cap on held input
    return w


def test_copy_equals_a_deep_copy_and_every_field_is_set() -> None:
    w = _state()
    for f in dataclasses.fields(w):  # a new field left out of copy() would fail here
        assert getattr(w, f.name) not in (None, {}, [], 0), f.name
    assert w.copy() == copy.deepcopy(w)


def test_copy_is_independent_of_the_live_state() -> None:
    w = _state()
    snap = w.copy()
    before = copy.deepcopy(snap)
    w.ingest([Item("frames", "late", "s1", T0 + 80_000, T0 + 80_000, None)], now=102.0)
    w.tick(now=500.0)
    assert w != before  # the live state moved on ...
    assert snap == before  # ... and the snapshot did not


def test_held_captures_are_spooled_at_a_snapshot_and_a_late_one_gets_its_bytes_back(
    tmp_path: Path,
) -> None:
    """The next session's frame waits behind s1's end while a snapshot is taken: its bytes go
    to the spool of its window, not into the snapshot. It starts in the window s1's end
    closes, so it turns late when replayed, and the late capture carries its bytes again."""
    spool = WindowSpool(tmp_path / "spool")
    logic = WindowLogic(None, WindowConfig(allowed_lateness_s=0), lambda: 100.0, spool)
    frame = Item("frames", "f0", "s1", T0, T0, CaptureRef("k/f0", data=b"f0"))
    nxt = Item("frames", "g0", "s2", T0 + 20_000, T0 + 20_000, CaptureRef("k/g0", data=b"g0"))
    end = SessionEnd("s1", T0 + 15_000, (("frames", T0), ("audio", T0 + 15_000)))
    logic.on_batch([("u1", frame), ("u1", end)])
    logic.on_batch([("u1", nxt)])
    snap = logic.snapshot()
    assert snap is not None and [x.ref.data for x in snap.held.values()] == [None]
    assert spool.read("u1", T0) == {"k/f0": b"f0", "k/g0": b"g0"}
    audio = Item("audio", "a0", "s1", T0, T0 + 15_000, CaptureRef("k/a0", data=b"a0"))
    events, _ = logic.on_batch([("u1", audio)])
    (late,) = [e for e in events if isinstance(e, LateItem)]
    assert late.item.key == "g0" and late.item.ref.data == b"g0"
