"""Speech for the demo when espeak-ng is missing: the demo's lines, kept in the repository
as short 8 kHz WAVs (made once with espeak-ng by ``write_kept_speech``), placed at the
scene times of a generated session."""

from __future__ import annotations

import re
import wave
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from apps.demo.synthetic import SAMPLE_RATE, SceneTiming, SpokenLine, speak, write_wav

SPEECH_DIR = Path(__file__).parent / "speech"
KEPT_RATE = 8_000  # plenty for speech recognition, half the bytes of 16 kHz
_LEAD_S = 2.0  # the first line starts this far into its scene
_GAP_S = 0.8  # silence between two lines of a scene


class MissingSpeech(FileNotFoundError):
    """A line of the demo script has no kept WAV (run ``write_kept_speech``)."""


def kept_wav(text: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return SPEECH_DIR / f"{slug}.wav"


def resample(samples: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Band-limited (FFT) resampling of int16 samples."""
    if src == dst or samples.size == 0:
        return samples.astype(np.int16)
    n_out = int(round(samples.size * dst / src))
    spectrum = np.fft.rfft(samples.astype(np.float64))
    resized = np.zeros(n_out // 2 + 1, dtype=complex)
    m = min(resized.size, spectrum.size)
    resized[:m] = spectrum[:m]
    out = np.fft.irfft(resized, n=n_out) * (n_out / samples.size)
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


def load_line(text: str) -> np.ndarray:
    """The kept recording of ``text`` at the session's 16 kHz."""
    path = kept_wav(text)
    if not path.is_file():
        raise MissingSpeech(f"no kept speech for {text!r} ({path})")
    with wave.open(str(path), "rb") as w:
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return resample(samples, rate, SAMPLE_RATE)


def place_kept_speech(
    scenes: list[SceneTiming], start: datetime, total_s: float, wav_path: Path
) -> Path:
    """Write the session's audio track from the kept lines (as the generator would with
    espeak-ng) and record each scene's spoken lines; returns ``wav_path``."""
    track = np.zeros(int(round(total_s * SAMPLE_RATE)), dtype=np.int16)
    end = start + timedelta(seconds=total_s)
    for scene in scenes:
        cursor = scene.start + timedelta(seconds=_LEAD_S)
        for text in scene.spec.speech:
            samples = load_line(text)
            length = timedelta(seconds=samples.size / SAMPLE_RATE)
            if cursor + length > min(scene.end, end):
                break
            at = int(round((cursor - start).total_seconds() * SAMPLE_RATE))
            track[at : at + samples.size] = samples[: track.size - at]
            scene.spoken.append(SpokenLine(text=text, start=cursor, end=cursor + length))
            cursor += length + timedelta(seconds=_GAP_S)
    write_wav(wav_path, track)
    return wav_path


def write_kept_speech(lines: list[str]) -> list[Path]:
    """Record ``lines`` with espeak-ng into SPEECH_DIR (a maintainer's step, when the demo
    script's lines change; a unit test says which are missing)."""
    SPEECH_DIR.mkdir(parents=True, exist_ok=True)
    out = []
    for text in lines:
        path = kept_wav(text)
        write_wav(path, resample(speak(text), SAMPLE_RATE, KEPT_RATE), KEPT_RATE)
        out.append(path)
    return out
