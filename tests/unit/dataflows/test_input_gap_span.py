"""Lost input's span and wearers, from the gap's neighbours (dataflows/input_gaps.py),
and which windows a stored span marks (worldmm/store/input_gaps.py): pure functions."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

import pytest

from dataflows.input_gaps import (
    InputGap,
    Neighbour,
    _identity,
    partition_of,
    span_of,
    users_of,
)
from worldmm.store.input_gaps import InputGapSpan, gaps_in

PAD = 10_000
NOW = 9_000_000


def _gap(*neighbours: Neighbour, reason="log_end_below_position", **kw) -> InputGap:
    return InputGap("t", 1, 10, 14, 10, reason, neighbours=neighbours, **kw)


def test_span_runs_from_the_record_before_to_the_record_after_padded() -> None:
    gap = _gap(Neighbour("before", 9, "a", 100_000), Neighbour("after", 10, "b", 160_000))
    assert span_of(gap, NOW, PAD) == (90_000, 170_000)


def test_lost_records_the_worker_read_widen_the_span_and_close_it_when_all_were_read() -> None:
    before = Neighbour("before", 9, "a", 100_000)
    lost = [Neighbour("lost", o, "a", 100_000 + 1_000 * o) for o in range(10, 14)]
    assert span_of(_gap(before, *lost), NOW, PAD) == (90_000, 113_000 + PAD)
    # one lost record not read: it was captured at the latest when the gap was found
    assert span_of(_gap(before, *lost[:3]), NOW, PAD) == (90_000, NOW)


def test_with_nothing_after_the_gap_known_the_span_ends_when_it_was_found() -> None:
    assert span_of(_gap(Neighbour("before", 9, "a", 100_000)), NOW, PAD) == (90_000, NOW)
    # a capture time past the moment of finding (a wearer's clock ahead) still counts
    late = _gap(Neighbour("before", 9, "a", NOW + 5))
    assert span_of(late, NOW, PAD) == (NOW + 5 - PAD, NOW + 5 + PAD)


def test_with_nothing_before_the_gap_known_the_span_is_open_at_its_start() -> None:
    gap = _gap(Neighbour("after", 14, "a", 500_000), reason="earliest_above_position")
    assert span_of(gap, NOW, PAD) == (None, 510_000)
    assert span_of(_gap(), NOW, PAD) == (None, NOW)  # nothing known at all


def test_neighbours_without_a_time_are_left_out() -> None:
    gap = _gap(Neighbour("before", 9, "a", None), Neighbour("after", 10, "b", 200_000))
    assert span_of(gap, NOW, PAD) == (None, 210_000)


class _Unformattable(bytes):
    """A payload that refuses to be formatted (``%r`` of an 80 kB chunk was the cost)."""

    def __repr__(self) -> str:
        raise AssertionError("a record's bytes were formatted to identify it")


def test_a_records_identity_runs_over_its_bytes_without_formatting_them() -> None:
    headers = [("ts", b"1700000000000"), ("seq", b"3")]
    value = _Unformattable(bytes(80_044))
    assert _identity(b"alice", value, headers) == _identity(b"alice", bytes(80_044), headers)
    # any part changed, or bytes moved from one part to the next, is another record
    others = [
        (b"alice", bytes(80_043) + b"\1", headers),
        (b"bob", bytes(80_044), headers),
        (b"alice", bytes(80_044), [("ts", b"1700000000001"), ("seq", b"3")]),
        (b"alic", b"e" + bytes(80_044), headers),
        (None, bytes(80_044), headers),
        (b"alice", None, headers),
    ]
    ids = {_identity(*o) for o in others} | {_identity(b"alice", value, headers)}
    assert len(ids) == len(others) + 1
    assert _identity(b"", b"", None) != _identity(None, None, None)


def test_partition_of_is_crc32_modulo_the_partition_count() -> None:
    assert partition_of(b"alice", 4) == zlib.crc32(b"alice") % 4
    assert {partition_of(f"u{i}".encode(), 3) for i in range(30)} == {0, 1, 2}


def test_wearers_of_a_gap_come_from_neighbours_reads_and_the_partitioner() -> None:
    known = [f"u{i}" for i in range(20)]
    on_1 = {u for u in known if partition_of(u.encode(), 4) == 1}
    gap = _gap(Neighbour("before", 9, "x", 1), Neighbour("after", 10, None, 2), users={"y"})
    assert users_of(gap, known) == {"x", "y"}  # partition count not known: no mapping
    mapped = _gap(Neighbour("before", 9, "x", 1), users=frozenset({"y"}), partitions=4)
    assert users_of(mapped, known) == {"x", "y"} | on_1 and on_1


def _at(s: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=s)


@pytest.mark.parametrize(
    ("window", "marked"),
    [
        ((0, 30), False),  # ends before the span
        ((30, 60), False),  # ends where it starts: [start, end) does not reach it
        ((60, 90), True),
        ((90, 120), True),  # starts where it ends: the end is a capture time, inclusive
        ((120, 150), False),
        ((0, 3600), True),  # an hour around it
    ],
)
def test_a_window_is_marked_when_it_overlaps_the_span(window, marked) -> None:
    span = InputGapSpan("t", 0, 5, 9, "offsets_reused", _at(60), _at(90))
    assert bool(gaps_in([span], _at(window[0]), _at(window[1]))) is marked


def test_an_open_span_marks_every_window_before_its_end() -> None:
    span = InputGapSpan("t", 0, 5, 9, "earliest_above_position", None, _at(90))
    assert gaps_in([span], _at(-(10**6)), _at(-(10**6) + 30)) == [span]
    assert gaps_in([span], _at(91), _at(121)) == []
    assert span.records == 4
