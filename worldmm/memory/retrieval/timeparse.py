"""Time in the question: "yesterday afternoon", "the last time", "on day 3" → a constraint.

:func:`parse_time` reads a question against the moment it is asked (``as_of``) and returns a
:class:`TimeConstraint`: a range the answer should lie in, and/or a prior that favours
recent ("the last time", "just now") or early ("the first time") moments. Retrieval lanes
apply both. Parts of the day are read in ``as_of``'s own timezone (the wearer's clock when
the API is given an offset; UTC otherwise).

Unknown phrasing means no constraint: the parser never raises. It is pure (no clock, no
I/O), so the table of phrases in the tests is its whole specification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal

Prior = Literal["recent", "early"]

# Parts of the day as [start hour, end hour) of the same day; "night" runs past midnight.
DAY_PARTS: dict[str, tuple[int, int]] = {
    "morning": (5, 12),
    "noon": (11, 14),
    "lunchtime": (11, 14),
    "afternoon": (12, 18),
    "evening": (17, 23),
    "night": (18, 29),  # 18:00 to 05:00 the next morning
}
JUST_NOW = timedelta(hours=1)  # "just now" in conversation reaches back an hour or so
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple of": 2,
    "few": 3,
}
_NUM = r"(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)"


@dataclass(frozen=True)
class TimeConstraint:
    """Where in time the answer should lie. ``start``/``end``: a range ``[start, end)`` (either
    may be open); ``prior``: favour recent or early moments; ``phrases``: what was read."""

    start: datetime | None = None
    end: datetime | None = None
    prior: Prior | None = None
    phrases: tuple[str, ...] = ()

    @property
    def has_range(self) -> bool:
        return self.start is not None or self.end is not None

    @property
    def empty(self) -> bool:
        return not self.has_range and self.prior is None


NONE = TimeConstraint()

_RECENT = re.compile(
    r"\b(the\s+)?(last|latest|previous|most\s+recent(ly)?)\s+(time|occasion)\b"
    r"|\bmost\s+recently\b|\b(i|we|you|he|she|they)\s+just\s+(?!now\b)\w+"
    r"|\bjust\s+(did|saw|said|put|had|got|made|took|used|moved|left|bought|helped)\b"
    r"|\brecently\b|\blately\b"
)
_EARLY = re.compile(
    r"\b(the\s+)?(very\s+)?first\s+(time|occasion)\b|\bfor\s+the\s+first\s+time\b"
    r"|\binitially\b|\boriginally\b|\bin\s+the\s+beginning\b|\bat\s+first\b"
)
_JUST_NOW = re.compile(
    r"\bjust\s+now\b|\ba\s+(moment|minute|second)\s+ago\b|\bmoments\s+ago\b|\bright\s+now\b"
)
_AGO = re.compile(rf"\b{_NUM}\s+(minute|hour|day|week)s?\s+ago\b")
_DAY_BEFORE_YESTERDAY = re.compile(r"\b(the\s+)?day\s+before\s+yesterday\b")
_YESTERDAY = re.compile(r"\byesterday\b")
_LAST_NIGHT = re.compile(r"\blast\s+night\b")
_TONIGHT = re.compile(r"\btonight\b")
_TODAY = re.compile(r"\b(today|earlier\s+today|so\s+far\s+today)\b")
_THIS_PART = re.compile(r"\bthis\s+(morning|afternoon|evening|noon|lunchtime)\b")
_PART = re.compile(r"\b(in\s+the\s+|at\s+|around\s+)?(morning|noon|lunchtime|afternoon|evening)\b")
_ON_DAY = re.compile(r"\b(on\s+)?day\s*(\d{1,3})\b")
_WEEKDAY = re.compile(rf"\b(last\s+|on\s+)?({'|'.join(WEEKDAYS)})\b")
_THIS_WEEK = re.compile(r"\bthis\s+week\b")
_LAST_WEEK = re.compile(r"\blast\s+week\b")
_CLOCK = re.compile(r"\b(at|around|about)\s+(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?|o'clock)?")


def _number(word: str) -> int | None:
    word = re.sub(r"\s+", " ", word.strip())
    if word.isdigit():
        return int(word)
    return NUMBERS.get(word)


def _day_start(day: date, tz) -> datetime:
    return datetime.combine(day, time(0), tzinfo=tz)


def _part_range(day: date, part: str, tz) -> tuple[datetime, datetime]:
    lo, hi = DAY_PARTS[part]
    base = _day_start(day, tz)
    return base + timedelta(hours=lo), base + timedelta(hours=hi)


def _clock(m: re.Match[str]) -> time | None:
    """A clock time from "at 3 pm", "around 11:30", "at 9 o'clock"; None when it is not one
    (a bare "at 3" could be anything, so a suffix or minutes are required)."""
    hour, minute, suffix = int(m.group(2)), m.group(3), (m.group(4) or "").replace(".", "")
    if not suffix and minute is None:
        return None
    if suffix == "pm" and hour < 12:
        hour += 12
    elif suffix == "am" and hour == 12:
        hour = 0
    if hour > 23 or (minute is not None and int(minute) > 59):
        return None
    return time(hour, int(minute or 0))


def parse_time(
    question: str, as_of: datetime | None, *, first_day: date | None = None
) -> TimeConstraint:
    """The time constraint of ``question`` asked at ``as_of``; ``first_day`` is the first day
    of the user's memory ("day 1"). Without ``as_of`` only the priors can be read."""
    try:
        return _parse(question, as_of, first_day)
    except (ValueError, OverflowError):  # an absurd number ("9999 days ago"): no constraint
        return NONE


def _parse(question: str, as_of: datetime | None, first_day: date | None) -> TimeConstraint:
    text = " ".join(question.lower().split())
    phrases: list[str] = []
    prior: Prior | None = None
    if m := _EARLY.search(text):
        prior, _ = "early", phrases.append(m.group(0))
    elif m := _RECENT.search(text):
        prior, _ = "recent", phrases.append(m.group(0))
    if as_of is None:
        return TimeConstraint(prior=prior, phrases=tuple(phrases))
    tz = as_of.tzinfo
    today = as_of.date()

    def done(start: datetime | None, end: datetime | None, phrase: str) -> TimeConstraint:
        if end is not None and end > as_of:
            end = None  # the future is already hidden by as_of
        if start is not None and start >= as_of:
            return TimeConstraint(prior=prior, phrases=tuple(phrases))  # nothing visible yet
        return TimeConstraint(start, end, prior, (*phrases, phrase))

    if m := _JUST_NOW.search(text):
        return done(as_of - JUST_NOW, None, m.group(0))
    if m := _AGO.search(text):
        n = _number(m.group(1))
        if n is not None:
            unit = {
                "minute": timedelta(minutes=1),
                "hour": timedelta(hours=1),
                "day": timedelta(days=1),
                "week": timedelta(weeks=1),
            }[m.group(2)]
            if m.group(2) in ("day", "week"):
                first = today - (unit * n)
                span = 1 if m.group(2) == "day" else 7
                return done(
                    _day_start(first, tz), _day_start(first + timedelta(days=span), tz), m.group(0)
                )
            # "two hours ago" is loose: one unit or half the distance either side
            slack = max(unit, unit * n / 2)
            ago = as_of - unit * n
            return done(ago - slack, min(as_of, ago + slack), m.group(0))

    # A day, then a part of that day or a clock time within it.
    day: date | None = None
    day_phrase = ""
    if m := _LAST_NIGHT.search(text):
        start, _ = _part_range(today - timedelta(days=1), "night", tz)
        night_end = _day_start(today, tz) + timedelta(hours=DAY_PARTS["night"][1] - 24)
        return done(start, night_end, m.group(0))
    if m := _TONIGHT.search(text):
        start, end = _part_range(today, "night", tz)
        return done(start, end, m.group(0))
    if m := _DAY_BEFORE_YESTERDAY.search(text):
        day, day_phrase = today - timedelta(days=2), m.group(0)
    elif m := _YESTERDAY.search(text):
        day, day_phrase = today - timedelta(days=1), m.group(0)
    elif m := _THIS_PART.search(text):
        start, end = _part_range(today, m.group(1), tz)
        return done(start, end, m.group(0))
    elif m := _TODAY.search(text):
        day, day_phrase = today, m.group(0)
    elif (m := _ON_DAY.search(text)) and first_day is not None:
        n = int(m.group(2))
        if n >= 1:
            day, day_phrase = first_day + timedelta(days=n - 1), m.group(0)
    elif m := _WEEKDAY.search(text):
        back = (today.weekday() - WEEKDAYS.index(m.group(2))) % 7
        if m.group(1) and m.group(1).strip() == "last" and back == 0:
            back = 7
        day, day_phrase = today - timedelta(days=back), m.group(0)
    elif m := _THIS_WEEK.search(text):
        monday = today - timedelta(days=today.weekday())
        return done(_day_start(monday, tz), None, m.group(0))
    elif m := _LAST_WEEK.search(text):
        monday = today - timedelta(days=today.weekday())
        return done(_day_start(monday - timedelta(days=7), tz), _day_start(monday, tz), m.group(0))

    if day is None:
        return TimeConstraint(prior=prior, phrases=tuple(phrases))
    if m := _PART.search(text):
        start, end = _part_range(day, m.group(2), tz)
        return done(start, end, f"{day_phrase} {m.group(0)}")
    if (m := _CLOCK.search(text)) and (clock := _clock(m)) is not None:
        at = datetime.combine(day, clock, tzinfo=tz)
        return done(
            at - timedelta(minutes=30), at + timedelta(minutes=30), f"{day_phrase} {m.group(0)}"
        )
    return done(_day_start(day, tz), _day_start(day + timedelta(days=1), tz), day_phrase)
