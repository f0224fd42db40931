"""The time parser's whole specification: a table of phrases asked at a fixed moment."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from worldmm.memory.retrieval.question_time import NONE, parse_time

# Wednesday 2025-01-15, 16:20 UTC
AS_OF = datetime(2025, 1, 15, 16, 20, tzinfo=UTC)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2025, 1, day, hour, minute, tzinfo=UTC)


RANGES = [
    ("What did I eat yesterday afternoon?", at(14, 12), at(14, 18)),
    ("Where did I put the keys this morning?", at(15, 5), at(15, 12)),
    ("What did Alice say two days ago?", at(13, 0), at(14, 0)),
    ("What did I do the day before yesterday?", at(13, 0), at(14, 0)),
    ("Who did I talk to yesterday?", at(14, 0), at(15, 0)),
    ("What did we watch last night?", at(14, 18), at(15, 5)),
    ("What was on the table just now?", AS_OF - timedelta(hours=1), None),
    ("What did I read a moment ago?", AS_OF - timedelta(hours=1), None),
    ("What did I buy earlier today?", at(15, 0), None),  # end past as_of is left open
    ("What did I cook on day 3?", at(12, 0), at(13, 0)),  # first_day = Jan 10
    ("Who called two hours ago?", AS_OF - timedelta(hours=3), AS_OF - timedelta(hours=1)),
    (
        "What did I see 30 minutes ago?",
        AS_OF - timedelta(minutes=45),
        AS_OF - timedelta(minutes=15),
    ),
    ("Where was I on Monday?", at(13, 0), at(14, 0)),
    ("What happened last Wednesday?", at(8, 0), at(9, 0)),
    ("What did I do yesterday at 3 pm?", at(14, 14, 30), at(14, 15, 30)),
    ("What did I order yesterday morning", at(14, 5), at(14, 12)),
    ("What happened last week?", at(6, 0), at(13, 0)),
    # compound and spoken forms (the phrasing of EgoLife's time options)
    ("About eleven hours ago", AS_OF - timedelta(hours=16.5), AS_OF - timedelta(hours=5.5)),
    ("Half a day ago", AS_OF - timedelta(hours=18), AS_OF - timedelta(hours=6)),
    ("Half an hour ago", AS_OF - timedelta(minutes=45), AS_OF - timedelta(minutes=15)),
    ("1 day 6 hours ago", AS_OF - timedelta(hours=45), AS_OF - timedelta(hours=15)),
    ("The afternoon before yesterday", at(13, 12), at(13, 18)),
    ("The night before yesterday", at(13, 18), at(14, 5)),
    ("Three days ago at noon", at(12, 11), at(12, 14)),
    ("Three days ago at night", at(12, 18), at(13, 5)),
    ("yesterday night", at(14, 18), at(15, 5)),
    (
        "What did I see 90 minutes ago?",
        AS_OF - timedelta(minutes=135),
        AS_OF - timedelta(minutes=45),
    ),
]


@pytest.mark.parametrize(("question", "start", "end"), RANGES)
def test_ranges(question: str, start: datetime | None, end: datetime | None) -> None:
    got = parse_time(question, AS_OF, first_day=date(2025, 1, 10))
    assert (got.start, got.end) == (start, end), got
    assert got.phrases


PRIORS = [
    ("When was the last time I used the scissors?", "recent"),
    ("Who did I just move the whiteboard with?", "recent"),
    ("What did I most recently buy?", "recent"),
    ("Who was the first to write on the whiteboard the first time we met?", "early"),
    ("What did I initially plan for dinner?", "early"),
    ("Where is my phone?", None),
]


@pytest.mark.parametrize(("question", "prior"), PRIORS)
def test_priors(question: str, prior: str | None) -> None:
    got = parse_time(question, AS_OF)
    assert got.prior == prior
    assert not got.has_range


def test_range_and_prior_compose() -> None:
    got = parse_time("The last time I saw Bob yesterday evening, what was he holding?", AS_OF)
    assert got.prior == "recent"
    assert (got.start, got.end) == (at(14, 17), at(14, 23))


@pytest.mark.parametrize(
    "question",
    [
        "",
        "What colour is the sky?",
        "What happened on day 3?",  # no first_day known: no constraint
        "What did I do 99999999 days ago?",  # absurd: no constraint, no error
        "at 99:99 pm yesterday??",
        "🙂 ∑ yesterday\x00",
    ],
)
def test_unknown_or_odd_phrasing_never_raises(question: str) -> None:
    got = parse_time(question, AS_OF)
    assert got.start is None or got.start < AS_OF


def test_unknown_phrasing_is_no_constraint() -> None:
    assert parse_time("What colour is the sky?", AS_OF) == NONE
    assert parse_time("What happened on day 3?", AS_OF) == NONE


def test_day_parts_follow_the_as_of_timezone() -> None:
    tokyo = timezone(timedelta(hours=9))
    as_of = datetime(2025, 1, 15, 10, 0, tzinfo=tokyo)
    got = parse_time("what did I have this morning", as_of)
    assert got.start == datetime(2025, 1, 15, 5, 0, tzinfo=tokyo)
    assert got.end is None  # 12:00 is after as_of


def test_without_as_of_only_priors() -> None:
    assert parse_time("the last time I was here, yesterday", None).prior == "recent"
    assert not parse_time("yesterday", None).has_range


def test_a_range_entirely_after_as_of_is_dropped() -> None:
    early = datetime(2025, 1, 15, 3, 0, tzinfo=UTC)  # 03:00: "this afternoon" has not begun
    assert not parse_time("what will I do this afternoon", early).has_range


def test_options_listed_after_the_question_are_not_the_time_asked_about() -> None:
    from worldmm.agent.choices import with_choices

    times = ["About 4 hours ago", "About 2 days ago", "Last night", "Yesterday at noon"]
    # the agent searches a multiple-choice question as the question and its lettered options
    listed = with_choices("When was the AI topic mentioned before?", times)
    assert "(B) About 2 days ago" in listed
    assert parse_time(listed, AS_OF) == NONE
    last = with_choices("When was the last time I used the power strip?", times)
    got = parse_time(last, AS_OF)
    assert got.prior == "recent" and not got.has_range
    # the question's own time still counts, and one option's lookup still reads its time
    own = parse_time(with_choices("What did I eat yesterday afternoon?", times), AS_OF)
    assert (own.start, own.end) == (at(14, 12), at(14, 18))
    one = parse_time("When was the AI topic mentioned before? About 2 days ago", AS_OF)
    assert one.has_range
    # an "(A)" that lists nothing after it is words like any other
    assert parse_time("Plan (A) was dropped two days ago", AS_OF).has_range
