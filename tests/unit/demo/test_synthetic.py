"""The generated glasses session: frame count, timeline, speech where scenes speak."""

from __future__ import annotations

import hashlib
import wave
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from PIL import Image

from apps.demo.synthetic import (
    SAMPLE_RATE,
    SceneSpec,
    SessionFiles,
    espeak_available,
    generate_session,
)

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng not installed")


def _samples(path):
    with wave.open(str(path), "rb") as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (SAMPLE_RATE, 1, 2)
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)


def _rms(x):
    return float(np.sqrt(np.mean(x**2))) if x.size else 0.0


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> SessionFiles:
    return generate_session(tmp_path_factory.mktemp("syn"), minutes=2.5, fps=2, start=START, seed=7)


def test_frame_count_and_format(session):
    files = sorted(session.frames_dir.glob("*.jpg"))
    assert len(files) == session.n_frames == 300
    with Image.open(files[0]) as img:
        assert img.format == "JPEG" and img.size == (640, 480)


def test_scenes_cover_the_session_in_30_to_60s_pieces(session):
    scenes = session.scenes
    assert scenes[0].start == START
    assert scenes[-1].end == START + timedelta(minutes=2.5)
    for a, b in zip(scenes, scenes[1:], strict=False):
        assert a.end == b.start
    for s in scenes[:-1]:
        assert 30 <= (s.end - s.start).total_seconds() <= 60
    assert session.scene_at(START + timedelta(seconds=1)) is scenes[0]


def test_speech_where_scenes_speak_and_silence_between(session):
    audio = _samples(session.audio_wav)
    assert audio.size == int(2.5 * 60 * SAMPLE_RATE)
    spoken = [line for s in session.scenes for line in s.spoken]
    assert spoken, "the default script speaks in every scene"
    mask = np.zeros(audio.size, dtype=bool)
    for line in spoken:
        a = int((line.start - START).total_seconds() * SAMPLE_RATE)
        b = int((line.end - START).total_seconds() * SAMPLE_RATE)
        assert _rms(audio[a:b]) > 500, line.text
        mask[a:b] = True
    assert _rms(audio[~mask]) < 1.0  # silence (edge samples may differ by rounding)


def test_deterministic_for_a_seed(tmp_path):
    def digest(out, seed):
        f = generate_session(out, minutes=0.5, start=START, seed=seed)
        h = hashlib.sha256()
        for p in sorted(f.frames_dir.glob("*.jpg")):
            h.update(p.read_bytes())
        h.update(f.audio_wav.read_bytes())
        return h.hexdigest(), [s.end for s in f.scenes]

    assert digest(tmp_path / "a", 3) == digest(tmp_path / "b", 3)
    assert digest(tmp_path / "c", 4) != digest(tmp_path / "a", 3)


def test_custom_script_and_manifest(tmp_path):
    script = [
        SceneSpec(
            sign="GARAGE", objects=["car"], speech=["The bike is in the garage."], duration_s=20
        )
    ]
    f = generate_session(tmp_path, minutes=1, fps=0.5, start=START, script=script)
    assert f.n_frames == 30
    assert [s.spec.sign for s in f.scenes] == ["GARAGE"] * 3  # the script cycles
    assert SessionFiles.model_validate_json(f.manifest.read_text()).n_frames == 30


def test_twelve_minutes_is_fast(tmp_path):
    import time

    t0 = time.perf_counter()
    f = generate_session(tmp_path, minutes=12, start=START)
    elapsed = time.perf_counter() - t0
    assert f.n_frames == 720
    assert elapsed < 20, f"{elapsed:.1f}s"


def test_rejects_naive_start(tmp_path):
    with pytest.raises(ValueError):
        generate_session(tmp_path, minutes=1, start=START.replace(tzinfo=None))
