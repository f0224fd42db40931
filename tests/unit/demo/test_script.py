"""The demo's script, questions, window arithmetic and kept speech (pure, no servers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from apps.demo.script import (
    aligned_start,
    demo_questions,
    demo_script,
    expected_windows,
    spoken_lines,
)
from apps.demo.speech import kept_wav, load_line, place_kept_speech
from apps.demo.synthetic import SAMPLE_RATE, plan_scenes

T0 = datetime(2026, 3, 2, 9, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (720, {30: 24, 180: 4, 600: 2, 3600: 1}),  # 9:20-9:32: the remaining minute has no 3 min
        (300, {30: 10, 180: 2, 600: 1, 3600: 1}),
        (90, {30: 3, 180: 1, 600: 1, 3600: 1}),
    ],
)
def test_expected_windows_follow_the_flow_hierarchy(seconds, expected) -> None:
    assert expected_windows(T0, seconds) == expected


def test_expected_windows_across_an_hour() -> None:
    start = datetime(2026, 3, 2, 9, 50, tzinfo=UTC)
    assert expected_windows(start, 900) == {30: 30, 180: 5, 600: 2, 3600: 2}


def test_aligned_start_is_a_past_ten_minute_boundary_before_the_session_ends() -> None:
    now = datetime(2026, 3, 2, 9, 33, 12, tzinfo=UTC)
    start = aligned_start(300, now)
    assert start == datetime(2026, 3, 2, 9, 20, tzinfo=UTC)
    assert start + timedelta(seconds=300) < now
    assert aligned_start(300, datetime(2026, 3, 2, 9, 35, 6, tzinfo=UTC)).minute == 30


def test_script_fits_the_length_and_questions_match_its_scenes() -> None:
    five = demo_script(300)
    assert len(five) == 6 and sum(s.duration_s for s in five) == pytest.approx(300)
    assert len(demo_script(90)) == 3 and len(demo_script(20)) == 1
    assert [q.scene for q in demo_questions(3)] == [0, 1, 2]
    assert len(demo_questions(6)) == 5 and len(demo_questions(6, limit=3)) == 3
    assert any(q.choices for q in demo_questions(6))
    with pytest.raises(ValueError):
        demo_script(0)


def test_every_spoken_line_has_a_kept_recording() -> None:
    missing = [line for line in spoken_lines() if not kept_wav(line).is_file()]
    assert missing == [], "run apps.demo.speech.write_kept_speech(spoken_lines())"
    samples = load_line(spoken_lines()[0])
    assert 1.0 < samples.size / SAMPLE_RATE < 6.0
    assert np.abs(samples).max() > 1000  # speech, not silence


def test_kept_speech_is_placed_at_scene_times(tmp_path) -> None:
    script = demo_script(90)
    scenes = plan_scenes(script, T0, 90, seed=0)
    wav = place_kept_speech(scenes, T0, 90, tmp_path / "audio.wav")
    assert [len(s.spoken) for s in scenes] == [len(s.speech) for s in script]
    first = scenes[0].spoken[0]
    assert first.start == T0 + timedelta(seconds=2)
    import wave

    with wave.open(str(wav), "rb") as w:
        track = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    assert track.size == 90 * SAMPLE_RATE
    assert np.abs(track[:SAMPLE_RATE]).max() == 0  # silence before the first line
    assert np.abs(track[2 * SAMPLE_RATE : 4 * SAMPLE_RATE]).max() > 1000
