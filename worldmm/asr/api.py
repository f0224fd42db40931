"""Whisper over HTTP: OpenAI's or Groq's transcription endpoint (chosen by base URL)."""

from __future__ import annotations

import numpy as np

from worldmm import metrics
from worldmm.asr.audio import SpeechTranscriber, to_wav
from worldmm.asr.base import Transcript, TranscriptSegment
from worldmm.providers.errors import ModelCallError


class WhisperAPITranscriber(SpeechTranscriber):
    """Decodes locally first: bad chunks fail fast with AudioDecodeError, silence costs no call,
    and every upload is a plain 16 kHz WAV whatever the glasses sent."""

    backend = "api"

    def __init__(self, client, model: str, *, label: str = "openai") -> None:  # openai.OpenAI
        self._client = client
        self._model = model
        self.name = f"{label}:{model}"

    def _recognise(self, samples: np.ndarray, duration_s: float) -> Transcript:
        import openai

        try:
            reply = self._client.audio.transcriptions.create(
                model=self._model,
                file=("chunk.wav", to_wav(samples), "audio/wav"),
                response_format="verbose_json",
                timestamp_granularities=["segment"],
            )
        except openai.OpenAIError as exc:
            metrics.ASR_ERRORS.labels(backend=self.backend, reason="api").inc()
            raise ModelCallError(f"transcription failed: {exc}", role="asr") from exc
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
            duration_s=duration_s,
        )


def _get(item: object, key: str) -> object:
    return item[key] if isinstance(item, dict) else getattr(item, key)
