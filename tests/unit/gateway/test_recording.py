"""Gateway input handling (no broker): frame/audio preparation, planning, CLI input errors."""

from __future__ import annotations

import io
import wave
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from apps.gateway.recording import (
    GatewayInputError,
    audio_chunks,
    default_start,
    list_frame_files,
    load_audio,
    plan_recording,
    prepare_jpeg,
)
from connectors import codec

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _image(path: Path, size=(64, 48), fmt=None) -> Path:
    Image.new("RGB", size, (10, 200, 30)).save(path, format=fmt)
    return path


def _wav(path: Path, seconds: float, rate=16000, channels=1) -> Path:
    n = int(seconds * rate)
    tone = (np.sin(np.arange(n) * 2 * np.pi * 300 / rate) * 5000).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(tone, channels).tobytes())
    return path


def test_prepare_jpeg_passes_small_jpeg_and_shrinks_large_or_png(tmp_path):
    small = _image(tmp_path / "a.jpg").read_bytes()
    assert prepare_jpeg(small, 1280) == small
    big = io.BytesIO()
    Image.new("RGB", (3000, 1000)).save(big, format="PNG")
    out = prepare_jpeg(big.getvalue(), 1280)
    with Image.open(io.BytesIO(out)) as img:
        assert img.format == "JPEG" and img.size == (1280, 427)
    codec.check_jpeg(out)


def test_frame_files_in_name_order_and_bad_files_named(tmp_path):
    for name in ("b.png", "a.jpg", "c.JPEG"):
        _image(tmp_path / name, fmt="PNG" if name.endswith("png") else "JPEG")
    (tmp_path / "notes.txt").write_text("ignored")
    assert [p.name for p in list_frame_files(tmp_path)] == ["a.jpg", "b.png", "c.JPEG"]
    (tmp_path / "d.jpg").write_bytes(b"garbage")
    with pytest.raises(GatewayInputError, match="d.jpg"):
        list_frame_files(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(GatewayInputError, match="no image files"):
        list_frame_files(tmp_path / "empty")


def test_audio_chunks_cover_the_track(tmp_path):
    samples, rate = load_audio(_wav(tmp_path / "a.wav", 12.5, channels=2))
    assert rate == 16000 and samples.size == 12.5 * 16000  # stereo mixed down
    chunks = list(audio_chunks(samples, rate, start=START, chunk_s=5))
    assert [c.duration_ms for c in chunks] == [5000, 5000, 2500]
    assert [c.ts - START for c in chunks] == [
        timedelta(0),
        timedelta(seconds=5),
        timedelta(seconds=10),
    ]
    assert codec.wav_info(chunks[-1].wav) == (16000, 1, 40000)


def test_plan_frames_dir_with_audio(tmp_path):
    frames = tmp_path / "f"
    frames.mkdir()
    for i in range(4):
        _image(frames / f"{i:03d}.jpg")
    plan = plan_recording(frames_dir=frames, audio=_wav(tmp_path / "a.wav", 3), fps=2, start=START)
    items = list(plan.frames)
    assert [f.seq for f in items] == [0, 1, 2, 3]
    assert [f.ts for f in items] == [START + timedelta(seconds=i / 2) for i in range(4)]
    assert plan.duration_s == 3 and plan.n_frames == 4 and plan.n_audio_chunks == 1


def test_plan_rejects_bad_arguments_and_files(tmp_path):
    with pytest.raises(ValueError):
        plan_recording(fps=1)
    with pytest.raises(GatewayInputError, match="missing.mp4"):
        plan_recording(video=tmp_path / "missing.mp4")
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 100)
    with pytest.raises(GatewayInputError, match="bad.mp4"):
        plan_recording(video=bad)
    frames = tmp_path / "f"
    frames.mkdir()
    _image(frames / "0.jpg")
    bad_wav = tmp_path / "a.wav"
    bad_wav.write_bytes(b"RIFF0000WAVEjunk")
    with pytest.raises(GatewayInputError, match="a.wav"):
        plan_recording(frames_dir=frames, audio=bad_wav)


def test_default_start():
    now = START
    assert default_start(60, realtime=False, now=now) == now - timedelta(seconds=60)
    assert default_start(60, realtime=True, now=now) == now


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--frames", "{bad}"], "junk.jpg"),
        (["--video", "{tmp}/nope.mp4"], "nope.mp4"),
        (["--frames", "{good}", "--audio", "{tmp}/missing.wav"], "missing.wav"),
        (["--frames", "{good}", "--video", "{tmp}/x.mp4"], "exactly one"),
        (["--frames", "{good}", "--start", "2026-03-01T09:00:00"], "timezone"),
    ],
)
def test_cli_unreadable_input_exits_2_naming_the_file(tmp_path, monkeypatch, args, needle):
    from apps.cli import app

    bad, good = tmp_path / "bad", tmp_path / "good"
    bad.mkdir()
    good.mkdir()
    (bad / "junk.jpg").write_bytes(b"not a jpeg")
    _image(good / "0.jpg")
    monkeypatch.setenv("WORLDMM_STATE_DIR", str(tmp_path / "state"))
    argv = [a.format(bad=bad, good=good, tmp=tmp_path) for a in args]
    result = CliRunner().invoke(app, ["gateway", "--user", "u1", "--session", "s1", *argv])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_cli_rejects_unsafe_user(tmp_path):
    from apps.cli import app

    result = CliRunner().invoke(
        app, ["gateway", "--user", "../x", "--session", "s", "--frames", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--user" in result.output
