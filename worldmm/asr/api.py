"""Whisper over HTTP: OpenAI's or Groq's transcription endpoint (chosen by base URL), each call
retried by the model policy (worldmm.providers.calls)."""

from __future__ import annotations

import numpy as np

from worldmm import metrics
from worldmm.asr.audio import SpeechTranscriber, to_wav
from worldmm.asr.base import Transcript, TranscriptSegment
from worldmm.providers.calls import call_model_sync
from worldmm.providers.errors import ModelCallError
from worldmm.retry import RetryPolicy


class WhisperAPITranscriber(SpeechTranscriber):
    """Decodes locally first: bad chunks fail fast with AudioDecodeError, silence costs no call,
    and every upload is a plain 16 kHz WAV whatever the glasses sent."""

    backend = "api"

    def __init__(
        self,
        client,  # openai.OpenAI, built with max_retries=0
        model: str,
        *,
        retry: RetryPolicy,
        label: str = "openai",
    ) -> None:
        self._client = client
        self._model = model
        self._retry = retry
        self._label = label
        self.name = f"{label}:{model}"

    def _recognise(
        self, samples: np.ndarray, duration_s: float, prompt: str | None = None
    ) -> Transcript:
        import openai

        wav = to_wav(samples)
        try:
            reply = call_model_sync(
                lambda: self._client.audio.transcriptions.create(
                    model=self._model,
                    file=("chunk.wav", wav, "audio/wav"),
                    response_format="verbose_json",
                    timestamp_granularities=["segment"],
                    **({"prompt": prompt} if prompt else {}),
                ),
                self._retry,
                role="asr",
                provider=self._label,
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
