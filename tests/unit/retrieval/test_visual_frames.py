"""The visual retriever's pure parts: time ranges in a query and thinning frames."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from worldmm.memory.retrieval.question_time import iso_range as parse_time_range
from worldmm.memory.retrieval.reader import FrameRef
from worldmm.memory.retrieval.visual import thin_frames

T0 = datetime(2025, 5, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_parse_time_range_forms():
    assert parse_time_range("the red door") is None
    start, end = parse_time_range("around 2025-05-01 10:00:20")
    assert (start, end) == (at(5), at(35))
    start, end = parse_time_range("2025-05-01T12:00:00+02:00 until 2025-05-01T09:59:00Z")
    assert (start, end) == (at(-60), at(0))
    assert parse_time_range("2025-13-45T99:00 to x") is None


def test_thin_frames_bins():
    frames = [FrameRef(key=str(i), ts=at(i / 4)) for i in range(40)]  # 10 s at 4 fps
    assert [f.key for f in thin_frames(frames, at(0), at(10), 100)] == [
        str(i) for i in range(0, 40, 4)
    ]
    assert len(thin_frames(frames, at(0), at(10), 5)) == 5
    assert thin_frames([], at(0), at(1), 5) == []
