from datetime import UTC, datetime

import pytest

from bench.egolife.data import (
    DataError,
    clock_seconds,
    load_questions,
    load_windows,
    parse_clip,
    parse_days,
    parse_question,
    parse_target_time,
    select_questions,
)
from tests.fixtures.egolife_data import clip, question, write_questions, write_sync_dir


def utc(day: int, hh: int, mm: int, ss: int) -> datetime:
    return datetime(2025, 1, day, hh, mm, ss, tzinfo=UTC)


def test_single_point_target():
    assert parse_target_time({"date": "DAY3", "time": "11210217"}) == [utc(3, 11, 21, 2)]


def test_time_list_target():
    got = parse_target_time({"date": "DAY1", "time_list": ["13394908", "13512718"]})
    assert got == [utc(1, 13, 39, 49), utc(1, 13, 51, 27)]


def test_multi_point_string_uses_each_points_own_day():
    got = parse_target_time({"date": "DAY1", "time": "11360904DAY2_10453312DAY3_11235811"})
    assert got == [utc(1, 11, 36, 9), utc(2, 10, 45, 33), utc(3, 11, 23, 58)]


def test_multi_point_string_same_day():
    got = parse_target_time({"date": "DAY1", "time": "11153417DAY1_11181201"})
    assert got == [utc(1, 11, 15, 34), utc(1, 11, 18, 12)]


def test_day_label_is_case_insensitive():
    assert parse_target_time({"date": "Day1", "time": "11153417"}) == [utc(1, 11, 15, 34)]
    assert parse_target_time({"date": "day2", "time": "09000000"}) == [utc(2, 9, 0, 0)]


def test_hundredths_above_99_compare_at_whole_seconds():
    assert clock_seconds("11153417") == clock_seconds("11153499") == clock_seconds("111534123")
    got = parse_target_time({"date": "DAY1", "time": "111534123DAY1_11181201"})
    assert got == [utc(1, 11, 15, 34), utc(1, 11, 18, 12)]


def test_multi_day_question_with_one_date_keeps_that_date():
    got = parse_target_time({"date": "DAY1", "time_list": ["20461818", "12074405"]})
    assert [t.day for t in got] == [1, 1]


@pytest.mark.parametrize(
    "bad",
    [
        {"time": "11000000"},
        {"date": "DAYX", "time": "11000000"},
        {"date": "DAY1", "time": "1100"},
        {"date": "DAY1", "time": "25000000"},
        {"date": "DAY1"},
        {"date": "DAY1", "time_list": []},
    ],
)
def test_malformed_targets_raise(bad):
    with pytest.raises(DataError):
        parse_target_time(bad)


def test_clip_starting_mid_window_lands_in_its_grid_cell():
    w = parse_clip(
        clip(
            "DAY1_A1_JAKE_11094208.mp4",
            [
                (110943, 110944, "I'm holding my phone.", "caption"),
                (110947, 110950, "Jake: Okay,  then we need a stopwatch.", "transcript"),
                (110951, 110952, "I swipe my phone.", "caption"),
            ],
        )
    )
    assert (w.start, w.end) == (utc(1, 11, 9, 30), utc(1, 11, 10, 0))
    assert w.caption == "I'm holding my phone. I swipe my phone."
    assert w.transcript == "Jake: Okay, then we need a stopwatch."
    assert w.text == w.caption + "\n" + w.transcript


def test_clip_with_unknown_line_type_raises():
    with pytest.raises(DataError):
        parse_clip(clip("DAY1_A1_JAKE_11000000.mp4", [(110001, 110002, "x", "ocr")]))


def test_load_windows_sorted_and_filtered_by_day(tmp_path):
    sync = write_sync_dir(tmp_path)
    all_w = load_windows(sync)
    assert [w.start for w in all_w] == [utc(1, 11, 0, 0), utc(1, 11, 0, 30), utc(2, 9, 0, 0)]
    assert [w.start for w in load_windows(sync, {2})] == [utc(2, 9, 0, 0)]


def test_two_clips_in_one_window_is_an_error(tmp_path):
    import json

    sync = tmp_path / "sync"
    sync.mkdir()
    (sync / "A1_JAKE_DAY1_11000000.json").write_text(
        json.dumps([clip("DAY1_A1_JAKE_11000000.mp4", []), clip("DAY1_A1_JAKE_11001500.mp4", [])])
    )
    with pytest.raises(DataError, match="two clips"):
        load_windows(sync)


def test_parse_days():
    assert parse_days("1-7") == set(range(1, 8))
    assert parse_days("1,3,5-6") == {1, 3, 5, 6}
    assert parse_days("2") == {2}
    for bad in ("", "0", "3-1", "a"):
        with pytest.raises(DataError):
            parse_days(bad)


def test_question_query_text_and_selection(tmp_path):
    qs = load_questions(write_questions(tmp_path))
    assert qs[0].query_text == "Where did I put the kettle? (A) On the stove (B) On the desk"
    assert qs[2].targets == [utc(2, 9, 0, 2)]
    assert [q.id for q in select_questions(qs, {1})] == ["1", "2"]
    assert [q.id for q in select_questions(qs, {1, 2}, limit=1)] == ["1"]
    assert [q.id for q in select_questions(qs, None)] == ["1", "2", "3"]


def test_question_missing_field_names_the_question():
    raw = question("7", "q?", ("DAY1", "11000000"), {"date": "DAY1", "time": "10000000"})
    del raw["query_time"]
    with pytest.raises(DataError, match="question 7"):
        parse_question(raw)
