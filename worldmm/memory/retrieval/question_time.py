"""The question's time: the moment it is read at, and the time its words name.

A question with ``as_of`` is read at that time; a live one (no ``as_of``) at the injected
clock's now (``Deps.clock``), and it sees only the memory that existed then, exactly as with
``as_of``: nothing in memory can come from the future. The zone is the caller's (resolved
once per question) or the user's profile zone (:func:`question_time`).

Time in the words: "yesterday afternoon", "the last time", "on day 3" → a constraint.
:func:`parse_time` reads a question at the moment it is asked (``now``: the question's
``as_of``, or the injected clock's now for a live question) on the wearer's clock (``tz``)
and returns a :class:`TimeConstraint`: a range the answer should lie in, and/or a prior that
favours recent ("the last time", "just now") or early ("the first time") moments. Every
memory's search reads time through it (episodic lanes, semantic facts, visual frames).

- Days and parts of days ("yesterday", "this morning", "last night", "on Tuesday", "at 3 pm")
  are wall-clock in the wearer's zone: a day runs from the wearer's midnight to midnight, so a
  daylight-saving day is 23 or 25 hours long (the zone database says which).
- Relative phrases ("two hours ago", "just now") are absolute-time arithmetic from ``now``.
- ISO-8601 times ("2025-05-01T10:00:00Z", "2025-05-01 10:00") name an explicit range; a time
  without an offset is read on the wearer's clock.

Unknown phrasing, and any time that would leave the calendar, mean no constraint: the parser
never raises. It is pure (``now`` and ``tz`` are passed in; no clock, no I/O), so the table
of phrases in the tests is its whole specification. Ranges come back in UTC.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Literal, Protocol
from zoneinfo import ZoneInfo

from worldmm.localtime import Asked, in_zone

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.memory.retrieval.results import RetrievalResult

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
CLOCK_SLACK = timedelta(minutes=30)  # "at 3 pm": half an hour either side
MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)
POINT_HALF_WINDOW = timedelta(seconds=15)  # one ISO time: the 30 s around it
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
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "few": 3,
}
_NUM = r"(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|couple of|few)"


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
_DAYS_HOURS_AGO = re.compile(rf"\b{_NUM}\s+days?\s+(?:and\s+)?{_NUM}\s+hours?\s+ago\b")
_HALF_AGO = re.compile(r"\bhalf\s+an?\s+(hour|day)\s+ago\b")
_DAY_BEFORE_YESTERDAY = re.compile(
    r"\b(the\s+)?(day|morning|noon|afternoon|evening|night)\s+before\s+yesterday\b"
)
_YESTERDAY = re.compile(r"\byesterday\b")
_LAST_NIGHT = re.compile(r"\blast\s+night\b")
_TONIGHT = re.compile(r"\btonight\b")
_TODAY = re.compile(r"\b(today|earlier\s+today|so\s+far\s+today)\b")
_THIS_PART = re.compile(r"\bthis\s+(morning|afternoon|evening|noon|lunchtime)\b")
_PART = re.compile(
    r"\b(in\s+the\s+|at\s+|around\s+)?(morning|noon|lunchtime|afternoon|evening|night)\b"
)
_ON_DAY = re.compile(r"\b(on\s+)?day\s*(\d{1,3})\b")
_WEEKDAY = re.compile(rf"\b(last\s+|on\s+)?({'|'.join(WEEKDAYS)})\b")
_THIS_WEEK = re.compile(r"\bthis\s+week\b")
_LAST_WEEK = re.compile(r"\blast\s+week\b")
_CLOCK = re.compile(r"\b(at|around|about)\s+(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?|o'clock)?")
_ISO = re.compile(
    r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?", re.IGNORECASE
)


def _number(word: str) -> int | None:
    word = re.sub(r"\s+", " ", word.strip())
    if word.isdigit():
        return int(word)
    return NUMBERS.get(word)


def _wall(day: date, hours: float, tz: tzinfo) -> datetime:
    """``hours`` after the wearer's midnight starting ``day``, read on the wall clock (hour
    29 is 05:00 the next day), as a UTC instant. A wall time skipped by a daylight-saving
    change reads with the offset before it."""
    naive = datetime.combine(day, time(0)) + timedelta(hours=hours)
    return naive.replace(tzinfo=tz).astimezone(UTC)


def _part_range(day: date, part: str, tz: tzinfo) -> tuple[datetime, datetime]:
    lo, hi = DAY_PARTS[part]
    return _wall(day, lo, tz), _wall(day, hi, tz)


def _day_range(day: date, days: int, tz: tzinfo) -> tuple[datetime, datetime]:
    return _wall(day, 0, tz), _wall(day + timedelta(days=days), 0, tz)


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


def iso_range(text: str, tz: tzinfo = UTC) -> tuple[datetime, datetime] | None:
    """The range ISO-8601 times in ``text`` name: two times, from the earlier to the later;
    one time, the 30 s around it. A time without an offset is on ``tz``'s clock. None when
    there is no valid time (or the range would leave the calendar)."""
    stamps = []
    for m in _ISO.finditer(text):
        try:
            ts = datetime.fromisoformat(m.group().upper().replace("Z", "+00:00"))
        except ValueError:
            continue
        stamps.append(ts if ts.tzinfo else ts.replace(tzinfo=tz))
    if not stamps:
        return None
    try:
        start, end = sorted(stamps[:2]) if len(stamps) > 1 else (stamps[0], stamps[0])
        if start == end:
            start, end = start - POINT_HALF_WINDOW, end + POINT_HALF_WINDOW
        return start.astimezone(UTC), end.astimezone(UTC)
    except OverflowError:  # "0001-01-01T00:00Z": no 15 s before it
        return None


# Lettered options listed after a question ("... (A) About 4 hours ago (B) Last night"), as
# the agent searches a multiple-choice question: the times they name are answers on offer.
_LISTED_OPTIONS = re.compile(r"\s\(A\)\s.*?\s\(B\)\s", re.DOTALL)


def asked_part(text: str) -> str:
    """``text`` without the lettered options listed after it (two at least, from "(A)")."""
    m = _LISTED_OPTIONS.search(text)
    return text[: m.start()] if m else text


def parse_time(
    question: str,
    now: datetime | None,
    tz: tzinfo | None = None,
    *,
    first_day: date | None = None,
) -> TimeConstraint:
    """The time constraint of ``question`` asked at ``now`` by a wearer in ``tz`` (default:
    ``now``'s own zone); ``first_day`` is the wearer's first day of memory ("day 1").
    Without ``now`` only the priors can be read. Options listed after the question
    (:func:`asked_part`) are not read: one of them naming "two days ago" does not make the
    question ask about two days ago."""
    try:
        return _parse(asked_part(question), now, tz, first_day)
    except (ValueError, OverflowError):  # an absurd number ("9999 days ago"): no constraint
        return NONE


def _parse(
    question: str, now: datetime | None, tz: tzinfo | None, first_day: date | None
) -> TimeConstraint:
    text = " ".join(question.lower().split())
    phrases: list[str] = []
    prior: Prior | None = None
    if m := _EARLY.search(text):
        prior, _ = "early", phrases.append(m.group(0))
    elif m := _RECENT.search(text):
        prior, _ = "recent", phrases.append(m.group(0))
    if now is None:
        return TimeConstraint(prior=prior, phrases=tuple(phrases))
    tz = tz or now.tzinfo or UTC
    now = now.astimezone(UTC)
    today = now.astimezone(tz).date()

    def done(start: datetime | None, end: datetime | None, phrase: str) -> TimeConstraint:
        if end is not None and end > now:
            end = None  # the future is hidden anyway: memory is bounded by the question's time
        if start is not None and start >= now:
            return TimeConstraint(prior=prior, phrases=tuple(phrases))  # nothing visible yet
        return TimeConstraint(start, end, prior, (*phrases, phrase))

    if (m := _ISO.search(text)) and (explicit := iso_range(text, tz)) is not None:
        return TimeConstraint(*explicit, prior, (*phrases, m.group(0)))  # named: kept as is
    if m := _JUST_NOW.search(text):
        return done(now - JUST_NOW, None, m.group(0))
    if (m := _DAYS_HOURS_AGO.search(text)) and None not in (
        days := _number(m.group(1)),
        hours := _number(m.group(2)),
    ):
        return done(*_ago(now, timedelta(hours=24 * days + hours), HOUR), m.group(0))
    if m := _HALF_AGO.search(text):
        half = timedelta(minutes=30) if m.group(1) == "hour" else timedelta(hours=12)
        return done(*_ago(now, half, MINUTE if m.group(1) == "hour" else HOUR), m.group(0))
    if m := _AGO.search(text):
        n = _number(m.group(1))
        if n is not None:
            unit = {
                "minute": MINUTE,
                "hour": HOUR,
                "day": timedelta(days=1),
                "week": timedelta(weeks=1),
            }[m.group(2)]
            if m.group(2) == "day" and (part := _PART.search(text)):  # "3 days ago at noon"
                start, end = _part_range(today - unit * n, part.group(2), tz)
                return done(start, end, f"{m.group(0)} {part.group(0)}")
            if m.group(2) in ("day", "week"):  # calendar days on the wearer's clock
                first = today - (unit * n)
                span = 1 if m.group(2) == "day" else 7
                return done(*_day_range(first, span, tz), m.group(0))
            return done(*_ago(now, unit * n, unit), m.group(0))

    # A day, then a part of that day or a clock time within it.
    day: date | None = None
    day_phrase = ""
    if m := _LAST_NIGHT.search(text):
        start, _ = _part_range(today - timedelta(days=1), "night", tz)
        return done(start, _wall(today, DAY_PARTS["night"][1] - 24, tz), m.group(0))
    if m := _TONIGHT.search(text):
        return done(*_part_range(today, "night", tz), m.group(0))
    if m := _DAY_BEFORE_YESTERDAY.search(text):
        if m.group(2) != "day":  # "the afternoon before yesterday"
            return done(*_part_range(today - timedelta(days=2), m.group(2), tz), m.group(0))
        day, day_phrase = today - timedelta(days=2), m.group(0)
    elif m := _YESTERDAY.search(text):
        day, day_phrase = today - timedelta(days=1), m.group(0)
    elif m := _THIS_PART.search(text):
        return done(*_part_range(today, m.group(1), tz), m.group(0))
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
        return done(_wall(monday, 0, tz), None, m.group(0))
    elif m := _LAST_WEEK.search(text):
        monday = today - timedelta(days=today.weekday())
        return done(*_day_range(monday - timedelta(days=7), 7, tz), m.group(0))

    clock = (m := _CLOCK.search(text)) and _clock(m)
    if day is None and clock:
        # "at 3 pm" alone: the latest 3 pm that has begun (today's, else yesterday's)
        day = today if _wall(today, _hours(clock), tz) <= now else today - timedelta(days=1)
    if day is None:
        return TimeConstraint(prior=prior, phrases=tuple(phrases))
    if part := _PART.search(text):
        start, end = _part_range(day, part.group(2), tz)
        return done(start, end, f"{day_phrase} {part.group(0)}".strip())
    if m and clock:
        at = _wall(day, _hours(clock), tz)
        return done(at - CLOCK_SLACK, at + CLOCK_SLACK, f"{day_phrase} {m.group(0)}".strip())
    return done(*_day_range(day, 1, tz), day_phrase)


def _ago(now: datetime, back: timedelta, unit: timedelta) -> tuple[datetime, datetime]:
    """ "two hours ago" is loose: one ``unit`` or half the distance either side."""
    slack = max(unit, back / 2)
    return now - back - slack, min(now, now - back + slack)


def _hours(clock: time) -> float:
    return clock.hour + clock.minute / 60


# --- the moment a question is read at ----------------------------------------------------
class Search(Protocol):
    """One memory's search: ``(deps, user_id, query, as_of=None, *, tz=None)``."""

    def __call__(
        self,
        deps: Deps,
        user_id: str,
        query: str,
        as_of: datetime | None = None,
        *,
        tz: ZoneInfo | None = None,
    ) -> Awaitable[RetrievalResult]: ...


async def question_time(
    deps: Deps, user_id: str, as_of: datetime | None = None, tz: ZoneInfo | None = None
) -> Asked:
    """``as_of`` or the clock's now, on ``tz`` (default: the user's zone, UTC when unset)."""
    at = as_of if as_of is not None else deps.clock()
    if tz is None:
        tz = await asyncio.to_thread(deps.reader.zone, user_id)
    return Asked(in_zone(at, UTC), tz)


def at_question_time(
    search: Callable[[Deps, str, str, Asked], Awaitable[RetrievalResult]],
) -> Search:
    """``search`` of a question read at :func:`question_time`, called as every search is."""

    async def searched(deps, user_id, query, as_of=None, *, tz=None):  # typed by Search
        return await search(deps, user_id, query, await question_time(deps, user_id, as_of, tz))

    searched.__doc__ = search.__doc__
    return searched


def first_memory_day(deps: Deps, user_id: str, tz: tzinfo) -> date | None:
    """The day of the user's first segment on the wearer's clock ("day 1" in a question)."""
    first = deps.reader.first_segment_start(user_id)
    return None if first is None else in_zone(first, tz).date()
