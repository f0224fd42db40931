"""The parser in the wearer's zone: the same phrases asked at one moment in three zones, and on
the daylight-saving days of America/New_York, with "now" passed in (no clock is read)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from worldmm.memory.retrieval.question_time import iso_range, parse_time

NY, TOKYO = ZoneInfo("America/New_York"), ZoneInfo("Asia/Tokyo")
# Wednesday 2025-01-15 16:20 UTC: 11:20 (Wed) in New York, 01:20 (Thu 16th) in Tokyo
NOW = datetime(2025, 1, 15, 16, 20, tzinfo=UTC)


def wall(tz, month: int, day: int, hour: int, minute: int = 0, second: int = 0):
    """A wall-clock time in ``tz`` as the UTC instant the parser returns."""
    return datetime(2025, month, day, hour, minute, second, tzinfo=tz).astimezone(UTC)


ZONED = [
    # (zone, question, start, end): each reading is the wearer's own day
    (UTC, "what did I eat yesterday afternoon", wall(UTC, 1, 14, 12), wall(UTC, 1, 14, 18)),
    (NY, "what did I eat yesterday afternoon", wall(NY, 1, 14, 12), wall(NY, 1, 14, 18)),
    (TOKYO, "what did I eat yesterday afternoon", wall(TOKYO, 1, 15, 12), wall(TOKYO, 1, 15, 18)),
    (UTC, "where were the keys this morning", wall(UTC, 1, 15, 5), wall(UTC, 1, 15, 12)),
    (NY, "where were the keys this morning", wall(NY, 1, 15, 5), None),  # 12:00 not yet
    (TOKYO, "where were the keys this morning", None, None),  # 05:00 Thu not begun: none
    (UTC, "what did we watch last night", wall(UTC, 1, 14, 18), wall(UTC, 1, 15, 5)),
    (TOKYO, "what did we watch last night", wall(TOKYO, 1, 15, 18), None),  # ends 05:00, later
    (NY, "who called two days ago", wall(NY, 1, 13, 0), wall(NY, 1, 14, 0)),
    (TOKYO, "who called two days ago", wall(TOKYO, 1, 14, 0), wall(TOKYO, 1, 15, 0)),
    (NY, "where was I on Tuesday", wall(NY, 1, 14, 0), wall(NY, 1, 15, 0)),
    (TOKYO, "where was I on Tuesday", wall(TOKYO, 1, 14, 0), wall(TOKYO, 1, 15, 0)),
    (NY, "what did I see at 3 pm", wall(NY, 1, 14, 14, 30), wall(NY, 1, 14, 15, 30)),  # latest
    (TOKYO, "what did I see at 3 pm", wall(TOKYO, 1, 15, 14, 30), wall(TOKYO, 1, 15, 15, 30)),
    # absolute arithmetic: the same instants in every zone
    (TOKYO, "who called two hours ago", NOW - timedelta(hours=3), NOW - timedelta(hours=1)),
    (NY, "what was here just now", NOW - timedelta(hours=1), None),
    # a naive ISO time is on the wearer's clock; one with an offset is kept
    (
        TOKYO,
        "at 2025-01-14 09:00",
        wall(TOKYO, 1, 14, 9) - timedelta(seconds=15),
        wall(TOKYO, 1, 14, 9) + timedelta(seconds=15),
    ),
    (TOKYO, "at 2025-01-14T09:00Z", wall(UTC, 1, 14, 8, 59, 45), wall(UTC, 1, 14, 9, 0, 15)),
]


@pytest.mark.parametrize(("tz", "question", "start", "end"), ZONED)
def test_phrases_read_on_the_wearers_clock(tz, question, start, end) -> None:
    got = parse_time(question, NOW, tz)
    assert (got.start, got.end) == (start, end), got
    assert got.has_range == (start is not None)


def test_the_clock_is_passed_in_not_read() -> None:
    """The same question asked at two moments reads two different days."""
    a = parse_time("yesterday", datetime(2025, 1, 15, 12, tzinfo=UTC), UTC)
    b = parse_time("yesterday", datetime(2025, 6, 1, 12, tzinfo=UTC), UTC)
    assert a.start == wall(UTC, 1, 14, 0) and b.start == wall(UTC, 5, 31, 0)


def u(month: int, day: int, hour: int) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def ny(month: int, day: int, hour: int) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=NY)


# 2026-03-08: New York springs forward (02:00 EST -> 03:00 EDT), a 23-hour day.
# 2026-11-01: New York falls back (02:00 EDT -> 01:00 EST), a 25-hour day.
SPRING = datetime(2026, 3, 9, 15, 0, tzinfo=NY)  # Monday after, 15:00 EDT
FALL = datetime(2026, 11, 2, 15, 0, tzinfo=NY)  # Monday after, 15:00 EST
DST = [
    # (now, question, start UTC, end UTC, hours long)
    (SPRING, "yesterday", u(3, 8, 5), u(3, 9, 4), 23),
    (FALL, "yesterday", u(11, 1, 4), u(11, 2, 5), 25),
    # the morning of the change: 05:00 is after it, so the day part is on the new offset
    (SPRING, "yesterday morning", u(3, 8, 9), u(3, 8, 16), 7),
    (FALL, "yesterday morning", u(11, 1, 10), u(11, 1, 17), 7),
    # the night across the change: 18:00 Sat EST to 05:00 Sun EDT is 10 hours; fall back 12
    (ny(3, 8, 12), "last night", u(3, 7, 23), u(3, 8, 9), 10),
    (ny(11, 1, 12), "last night", u(10, 31, 22), u(11, 1, 10), 12),
    # relative phrases stay absolute-time arithmetic across the change
    (ny(3, 8, 4), "two hours ago", u(3, 8, 5), u(3, 8, 7), 2),
]


@pytest.mark.parametrize(("now", "question", "start", "end", "hours"), DST)
def test_daylight_saving_days_of_new_york(now, question, start, end, hours) -> None:
    got = parse_time(question, now, NY)
    assert (got.start, got.end) == (start, end), got
    assert got.end - got.start == timedelta(hours=hours)


def test_the_wearers_zone_overrides_the_nows_offset() -> None:
    """``now`` may arrive in UTC (the clock) or any offset (an as_of): only ``tz`` decides."""
    in_utc = parse_time("yesterday afternoon", NOW, TOKYO)
    in_ny = parse_time("yesterday afternoon", NOW.astimezone(NY), TOKYO)
    assert in_utc == in_ny and in_utc.start == wall(TOKYO, 1, 15, 12)


@pytest.mark.parametrize(
    "text", ["0001-01-01T00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00", "2025-13-40T99:00Z"]
)
def test_edge_of_calendar_iso_times_are_no_constraint_or_a_range(text: str) -> None:
    got = iso_range(text, TOKYO)  # never raises
    assert got is None or got[0] < got[1]
    parse_time(f"what did I see at {text}", NOW, TOKYO)  # never raises either
