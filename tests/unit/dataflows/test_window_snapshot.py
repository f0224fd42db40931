"""The window step's snapshot: a container copy equal to a deep copy, and independent of the
live state (the step keeps mutating it after the snapshot was handed to Bytewax)."""

from __future__ import annotations

import copy
import dataclasses

from worldmm.memory.windows import Item, Pause, SessionEnd, UserWindows, WindowConfig

T0 = 1_767_225_600_000  # a 10 min boundary


def _state() -> UserWindows:
    """A state with every field set: two closed windows, an open one, a late capture, a
    privacy pause that ended and one still open, and a session end still waiting for its
    captures."""
    w = UserWindows("u1", WindowConfig(allowed_lateness_s=5.0))
    frames = [Item("frames", f"f{k}", "s1", T0 + k * 1000, T0 + k * 1000, k) for k in range(70)]
    audio = [Item("audio", f"a{k}", "s1", T0 + k * 5000, T0 + (k + 1) * 5000, k) for k in range(14)]
    w.ingest(frames + audio, now=100.0)  # the watermark (65 s) closes two windows
    w.ingest([Item("frames", "late", "s1", T0 + 500, T0 + 500, None)], now=100.5)
    pauses = [Pause("s1", T0 + 66_000), Pause("s1", T0 + 68_000, resume=True)]
    w.ingest([*pauses, Pause("s1", T0 + 69_500)], now=100.7)
    w.ingest([SessionEnd("s1", T0 + 200_000, (("frames", T0 + 200_000),))], now=101.0)
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
