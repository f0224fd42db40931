"""The browser's pure shaping: status words, card positions, fact histories, day bounds."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from query_api.ui.views import card_of, day_bounds, fact_histories, parse_day, status_of
from worldmm.store.input_gaps import InputGapSpan
from worldmm.store.models import SegmentRow, TripleRow

T0 = datetime(2026, 11, 20, tzinfo=UTC)


def _seg(**kw) -> SegmentRow:
    base = dict(
        id=1,
        user_id="u",
        session_id="s1",
        scale_seconds=30,
        window_start=T0 + timedelta(hours=6),
        window_end=T0 + timedelta(hours=6, seconds=30),
        processing_status="complete",
        visual_status="complete",
        created_at=T0,
        updated_at=T0,
    )
    return SegmentRow.model_validate(base | kw)


def _fact(i: int, replaced_by: int | None = None, invalidated: bool = False) -> TripleRow:
    return TripleRow(
        id=i,
        user_id="u",
        memory_type="semantic",
        subject_entity_id=1,
        subject_name="Anna",
        predicate="lives in",
        object_name=f"city {i}",
        valid_from=T0 + timedelta(days=i),
        invalidated_at=T0 + timedelta(days=i + 1) if invalidated else None,
        replaced_by=replaced_by,
        created_at=T0,
    )


def test_status_words():
    assert status_of(_seg()) == "complete"
    assert status_of(_seg(partial=True)) == "partial"
    assert status_of(_seg(visual_status="pending")) == "visual pending"
    assert status_of(_seg(processing_status="failed", partial=True)) == "failed"
    assert status_of(_seg(processing_status="pending")) == "pending"
    assert status_of(_seg(processing_status="paused", partial=True)) == "paused"


def test_a_paused_window_is_a_gap_with_its_reason():
    card = card_of(_seg(caption=None, processing_status="paused"), is_note=False)
    assert (card.caption, card.status) == ("privacy pause: nothing recorded", "paused")


def test_a_card_overlapping_lost_input_says_input_may_be_missing():
    start = T0 + timedelta(hours=6)
    gap = InputGapSpan("t", 0, 3, 5, "offsets_reused", start - timedelta(seconds=5), start)
    assert card_of(_seg(), is_note=False, gaps=[gap]).input_lost
    after = start + timedelta(seconds=30)  # the window's end: [start, end) does not reach it
    later = InputGapSpan("t", 0, 3, 5, "offsets_reused", after, after + timedelta(seconds=30))
    assert not card_of(_seg(), is_note=False, gaps=[later]).input_lost
    assert not card_of(_seg(), is_note=False).input_lost


def test_card_of_a_blank_caption_and_a_note():
    card = card_of(_seg(caption="  ", partial=True), is_note=True)
    assert (card.caption, card.status, card.note) == ("(no caption)", "partial", True)


def test_fact_history_chains_oldest_to_newest_newest_chain_first():
    rows = [_fact(1, replaced_by=3, invalidated=True), _fact(2), _fact(3)]
    chains = fact_histories(rows)
    assert [[v.fact.id for v in c] for c in chains] == [[1, 3], [2]]
    assert [v.current for v in chains[0]] == [False, True]


def test_fact_history_survives_a_cycle_and_shows_every_fact():
    rows = [_fact(1, replaced_by=2), _fact(2, replaced_by=1)]
    chains = fact_histories(rows)  # no chain start: every row still shown, no endless loop
    assert sorted(v.fact.id for c in chains for v in c) == [1, 2]


def test_day_bounds_and_parsing():
    assert day_bounds(date(2026, 11, 20)) == (T0, T0 + timedelta(days=1))
    assert parse_day("2026-11-20") == date(2026, 11, 20)
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        parse_day("yesterday")


@pytest.mark.parametrize("day", ["0001-01-01", "9999-12-31"])
def test_a_day_at_the_calendar_ends_is_refused_not_a_crash(day):
    # the page links the previous and next day: they must exist
    with pytest.raises(ValueError, match="out of range"):
        parse_day(day)
    assert parse_day("0001-01-02") - timedelta(days=1) == date(1, 1, 1)


@pytest.mark.parametrize(
    ("start", "end"),
    [("0001-01-01T00:00", "2026-01-01T00:00"), ("2026-01-01T00:00", "9999-12-31T23:59-23:59")],
)
def test_forget_range_at_the_calendar_ends_is_refused(start, end):
    from query_api.ui.routes import _range

    # naive form times are read on the wearer's clock (issue 22); UTC keeps the ends exact
    with pytest.raises(ValueError, match="out of range"):
        _range(start, end, UTC)
