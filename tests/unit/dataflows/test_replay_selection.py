"""Which messages a replay of one user / time range rebuilds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from connectors import codec
from dataflows.ingest import ReplaySelection

T0 = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)


def _frame(user: str, s: float) -> codec.FrameMessage:
    return codec.FrameMessage(user_id=user, session_id="s1", ts=T0 + timedelta(seconds=s), seq=0,
                              jpeg=b"x")  # fmt: skip


def _audio(user: str, s: float, ms: int) -> codec.AudioMessage:
    return codec.AudioMessage(user_id=user, session_id="s1", ts=T0 + timedelta(seconds=s),
                              duration_ms=ms, sample_rate=16000, data=b"\0\0")  # fmt: skip


def test_user_and_range() -> None:
    lo, hi = (
        codec.to_epoch_ms(T0 + timedelta(seconds=30)),
        codec.to_epoch_ms(T0 + timedelta(seconds=60)),
    )
    sel = ReplaySelection("a", lo, hi)
    assert not sel(_frame("b", 40))  # another user
    assert [sel(_frame("a", s)) for s in (29.999, 30, 59.999, 60)] == [False, True, True, False]
    # an audio chunk overlapping the start belongs to the window it reaches into
    assert sel(_audio("a", 27, 5000)) and not sel(_audio("a", 25, 5000))
    end = codec.ControlMessage(user_id="a", session_id="s1", ts=T0 + timedelta(hours=2),
                               event="session_end")  # fmt: skip
    assert sel(end)  # a session end flushes the last windows wherever the range stops
    assert ReplaySelection()(_frame("b", 0))
