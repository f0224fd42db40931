"""Whisper over HTTP: OpenAI's or Groq's transcription endpoint (chosen by base URL)."""

from __future__ import annotations

import time

from worldmm import metrics
from worldmm.asr.audio import speech_chunk, to_wav
from worldmm.asr.base import Transcript, TranscriptSegment
from worldmm.providers.errors import ModelCallError


class WhisperAPITranscriber:
    """Decodes locally first: bad chunks fail fast with AudioDecodeError, silence costs no call,
    and every upload is a plain 16 kHz WAV whatever the glasses sent."""

    def __init__(self, client, model: str, *, label: str = "openai") -> None:  # openai.OpenAI
        self._client = client
        self._model = model
        self.name = f"{label}:{model}"

    def transcribe(
        self, audio: bytes, *, content_type: str = "audio/wav", sample_rate: int | None = None
    ) -> Transcript:
        import openai

        samples, duration, silent = speech_chunk(audio, content_type, sample_rate, backend="api")
        if silent:
            return Transcript(text="", segments=[], duration_s=duration)
        started = time.perf_counter()
        try:
            reply = self._client.audio.transcriptions.create(
                model=self._model,
                file=("chunk.wav", to_wav(samples), "audio/wav"),
                response_format="verbose_json",
                timestamp_granularities=["segment"],
            )
        except openai.OpenAIError as exc:
            metrics.ASR_ERRORS.labels(backend="api", reason="api").inc()
            raise ModelCallError(f"transcription failed: {exc}", role="asr") from exc
        metrics.ASR_LATENCY.labels(backend="api").observe(time.perf_counter() - started)
        metrics.ASR_AUDIO_SECONDS.labels(backend="api").inc(duration)
        segments = [
            TranscriptSegment(
                start_s=float(_get(s, "start")),
                end_s=float(_get(s, "end")),
                text=str(_get(s, "text")).strip(),
            )
            for s in (getattr(reply, "segments", None) or [])
        ]
        return Transcript(
            text=(reply.text or "").strip(),
            segments=[s for s in segments if s.text],
            language=getattr(reply, "language", None),
            duration_s=duration,
        )


def _get(item: object, key: str) -> object:
    return item[key] if isinstance(item, dict) else getattr(item, key)
