"""Inputs of a 30 s window: uniform frame sampling and the window's audio, cut to the window.

Pure functions over bytes; no store, no models.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class CaptureRef:
    """What a window item points at: its blob and the metadata needed to use it. ``data``
    carries the capture's bytes from the moment it is read until it is spooled or stored
    (snapshots hold references only: :func:`without_data`)."""

    blob_key: str
    seq: int | None = None
    sample_rate: int | None = None
    duration_ms: int | None = None
    content_type: str = "image/jpeg"
    data: bytes | None = field(default=None, repr=False, compare=False)

    def without_data(self) -> CaptureRef:
        return replace(self, data=None) if self.data is not None else self


def sample_uniform(items: Sequence[T], k: int) -> list[T]:
    """``k`` items spread evenly over ``items`` (the middle of k equal bins); all if fewer."""
    n = len(items)
    if k <= 0:
        return []
    if n <= k:
        return list(items)
    return [items[min(n - 1, int((i + 0.5) * n / k))] for i in range(k)]


@dataclass(frozen=True)
class AudioPiece:
    start_ms: int
    wav: bytes


def _read_wav(data: bytes) -> tuple[int, bytes]:
    """(sample_rate, mono PCM16 LE) of a PCM16 WAV."""
    with wave.open(io.BytesIO(data), "rb") as w:
        rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    if width != 2:
        raise ValueError(f"need 16-bit PCM, got {8 * width}-bit")
    if channels > 1:
        import numpy as np

        samples = np.frombuffer(raw, dtype="<i2").reshape(-1, channels).astype(np.int32)
        raw = samples.mean(axis=1).astype("<i2").tobytes()
    return rate, raw


def window_audio(pieces: Sequence[AudioPiece], start_ms: int, end_ms: int) -> tuple[bytes, int]:
    """The window's audio as one PCM16 mono WAV and its sample rate.

    Each chunk contributes the part that lies inside [start_ms, end_ms); chunks are laid out
    in capture order (gaps are not padded: ASR only needs the speech). Chunks at a sample
    rate other than the first one's are skipped rather than resampled.
    """
    rate: int | None = None
    parts: list[bytes] = []
    for piece in sorted(pieces, key=lambda p: p.start_ms):
        r, pcm = _read_wav(piece.wav)
        if rate is None:
            rate = r
        if r != rate:
            continue
        n = len(pcm) // 2
        lo = max(0, (start_ms - piece.start_ms) * r // 1000)
        hi = min(n, (end_ms - piece.start_ms) * r // 1000)
        if hi > lo:
            parts.append(pcm[2 * lo : 2 * hi])
    if rate is None or not parts:
        return b"", rate or 16000
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(parts))
    return buf.getvalue(), rate
