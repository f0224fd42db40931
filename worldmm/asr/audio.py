"""Decoding audio chunks to 16 kHz mono float32, a silence gate, and the transcriber steps
every backend shares."""

from __future__ import annotations

import io
import re
import time
import wave
from abc import ABC, abstractmethod

import numpy as np

from worldmm import metrics
from worldmm.asr.base import AudioDecodeError, Transcript

TARGET_RATE = 16000
SILENCE_RMS = 10 ** (-55 / 20)  # about -55 dBFS: below this nothing is worth transcribing
_WAV_TYPES = {"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"}
_PCM_TYPES = {"audio/pcm", "audio/l16", "audio/x-pcm", "audio/raw"}


def _parse_content_type(content_type: str) -> tuple[str, dict[str, str]]:
    main, *params = [p.strip() for p in content_type.lower().split(";")]
    values = {}
    for p in params:
        key, _, value = p.partition("=")
        values[key.strip()] = value.strip()
    return main, values


def resample(samples: np.ndarray, rate: int, target: int = TARGET_RATE) -> np.ndarray:
    """Linear-interpolation resampling: enough for speech recognition input."""
    if rate == target or samples.size == 0:
        return samples.astype(np.float32)
    n_out = int(round(samples.size * target / rate))
    x_new = np.linspace(0, samples.size - 1, n_out)
    return np.interp(x_new, np.arange(samples.size), samples).astype(np.float32)


def _pcm16(data: bytes, rate: int, channels: int = 1) -> np.ndarray:
    if len(data) % (2 * channels):
        raise AudioDecodeError(
            f"PCM16 data of {len(data)} bytes is not a whole number of {channels}-channel samples"
        )
    samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return resample(samples, rate)


def _wav(data: bytes) -> np.ndarray:
    try:
        with wave.open(io.BytesIO(data)) as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as exc:
        raise AudioDecodeError(f"not a readable WAV file: {exc}") from exc
    if width == 2:
        return _pcm16(frames, rate, channels)
    if width == 1:
        samples = (np.frombuffer(frames, dtype=np.uint8).astype(np.float32) - 128) / 128
    elif width == 4:
        samples = np.frombuffer(frames, dtype="<i4").astype(np.float32) / 2**31
    else:
        raise AudioDecodeError(f"unsupported WAV sample width {width * 8} bits")
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return resample(samples, rate)


def _other_codec(data: bytes, content_type: str) -> np.ndarray:
    from faster_whisper.audio import decode_audio  # PyAV: ogg, mp3, webm, flac, m4a

    try:
        return decode_audio(io.BytesIO(data), sampling_rate=TARGET_RATE).astype(np.float32)
    except Exception as exc:  # PyAV raises many error types; all mean "cannot decode"
        raise AudioDecodeError(f"cannot decode {content_type} audio: {exc}") from exc


def decode_audio(
    audio: bytes, content_type: str = "audio/wav", sample_rate: int | None = None
) -> np.ndarray:
    """16 kHz mono float32 samples in [-1, 1] from WAV, raw PCM16 (``audio/pcm;rate=N`` or
    ``sample_rate``), or another container PyAV can read."""
    if not audio:
        raise AudioDecodeError("the audio chunk is empty")
    main, params = _parse_content_type(content_type or "audio/wav")
    rate = sample_rate or (int(params["rate"]) if params.get("rate", "").isdigit() else None)
    if main in _PCM_TYPES or (rate and main not in _WAV_TYPES and audio[:4] != b"RIFF"):
        if not rate:
            raise AudioDecodeError(f"raw PCM ({content_type}) needs a sample rate (;rate=16000)")
        channels = int(params.get("channels", "1"))
        return _pcm16(audio, rate, channels)
    if main in _WAV_TYPES or audio[:4] == b"RIFF":
        return _wav(audio)
    if re.match(r"audio/|video/|application/octet-stream", main):
        return _other_codec(audio, content_type)
    raise AudioDecodeError(f"unsupported audio content type {content_type!r}")


def is_silent(samples: np.ndarray) -> bool:
    return samples.size == 0 or float(np.sqrt(np.mean(samples**2))) < SILENCE_RMS


class SpeechTranscriber(ABC):
    """What every transcriber does around its model: decode the chunk first (an undecodable
    one raises AudioDecodeError), answer silence without a model call, and record the
    latency and the seconds of audio the model heard, all under ``backend``."""

    backend: str

    def transcribe(
        self,
        audio: bytes,
        *,
        content_type: str = "audio/wav",
        sample_rate: int | None = None,
        prompt: str | None = None,
    ) -> Transcript:
        try:
            samples = decode_audio(audio, content_type, sample_rate)
        except AudioDecodeError:
            metrics.ASR_ERRORS.labels(backend=self.backend, reason="decode").inc()
            raise
        duration = samples.size / TARGET_RATE
        if is_silent(samples):
            return Transcript(text="", segments=[], duration_s=duration)
        started = time.perf_counter()
        transcript = self._recognise(samples, duration, prompt)
        metrics.ASR_LATENCY.labels(backend=self.backend).observe(time.perf_counter() - started)
        metrics.ASR_AUDIO_SECONDS.labels(backend=self.backend).inc(duration)
        return transcript

    @abstractmethod
    def _recognise(
        self, samples: np.ndarray, duration_s: float, prompt: str | None = None
    ) -> Transcript:
        """The speech in ``samples`` (16 kHz mono float32, not silent)."""


def to_wav(samples: np.ndarray, rate: int = TARGET_RATE) -> bytes:
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()
