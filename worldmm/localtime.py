"""Time as the wearer lives it: IANA time zones, the moment a question is asked, and times
said the way a person says them ("yesterday at 15:02").

Stored times are UTC everywhere; a zone is applied only where a person reads or says a time.
Nothing here reads a clock except :func:`utc_now`, the default of the one injected clock
(``Deps.clock``): callers pass "now" in, so tests and benchmarks set it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from functools import cache
from typing import Annotated
from zoneinfo import ZoneInfo, available_timezones

from pydantic import AfterValidator, Field

DEFAULT_ZONE = "UTC"
RECENT_DAYS = 6  # a moment within this many days is said by its weekday ("on Tuesday at 9:10")


@cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def utc_now() -> datetime:
    """The wall clock, in UTC: the default of ``Deps.clock``."""
    return datetime.now(UTC)


def check_zone_name(name: str) -> str:
    """``name`` if it is an IANA time zone ("Asia/Tokyo", "UTC"); ValueError otherwise."""
    if name not in _zone_names():
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as 'Europe/Paris'")
    return name


ZoneName = Annotated[
    str,
    AfterValidator(check_zone_name),
    Field(
        max_length=64,
        description="An IANA time zone name, e.g. 'Asia/Tokyo' or 'America/New_York'.",
        examples=["Europe/Paris"],
    ),
]


def zone(name: str | None) -> ZoneInfo:
    """The zone of an IANA name; UTC for None (a user without one)."""
    return ZoneInfo(check_zone_name(name or DEFAULT_ZONE))


def in_zone(ts: datetime, tz: tzinfo) -> datetime:
    """``ts`` on ``tz``'s clock (the same instant); unchanged where the zone's clock would
    leave the calendar (a time at year 1 or 9999 has no local reading)."""
    try:
        return ts.astimezone(tz)
    except OverflowError:
        return ts


def utc_offset(at: datetime) -> str:
    """'UTC+09:00', 'UTC-04:00', 'UTC' for an aware local time."""
    offset = at.utcoffset() or timedelta(0)
    if not offset:
        return "UTC"
    sign = "+" if offset >= timedelta(0) else "-"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


@dataclass(frozen=True)
class Asked:
    """When a question is read and on whose clock: ``at`` is the question's time (``as_of``,
    or the injected clock's now for a live question), ``tz`` the wearer's zone."""

    at: datetime
    tz: ZoneInfo

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise ValueError("the question's time must be timezone-aware")

    @property
    def local(self) -> datetime:
        return in_zone(self.at, self.tz)

    @property
    def zone_name(self) -> str:
        return self.tz.key

    def label(self) -> str:
        """'15:02 on Wednesday 25 Nov 2026 (Asia/Tokyo, UTC+09:00)': the question's time as
        the prompts give it to a model."""
        t = self.local
        return f"{t:%H:%M} on {t:%A} {t.day} {t:%b %Y} ({self.zone_name}, {utc_offset(t)})"

    def spoken(self, ts: datetime) -> str:
        """``ts`` as the wearer would say it, relative to the question's day: 'today at
        09:10', 'yesterday at 15:02', 'on Tuesday at 08:00', else 'at 08:00:05 on 1 May
        2025'. A time after the question is never 'today'/'yesterday'."""
        t, now = in_zone(ts, self.tz), self.local
        days = (now.date() - t.date()).days
        if 0 <= days <= RECENT_DAYS and t <= now:
            day = {0: "today", 1: "yesterday"}.get(days, f"on {t:%A}")
            return f"{day} at {t:%H:%M}"
        return f"at {t:%H:%M:%S} on {t.day} {t:%b %Y}"
