"""Speech recognition: local faster-whisper (offline default: Whisper base, or tiny.en) or a
Whisper API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldmm.asr.base import AudioDecodeError, Transcriber, Transcript, TranscriptSegment

if TYPE_CHECKING:
    from worldmm.settings import Settings

__all__ = [
    "AudioDecodeError",
    "NullTranscriber",
    "Transcriber",
    "Transcript",
    "TranscriptSegment",
    "build_transcriber",
]


class NullTranscriber:
    """``asr_backend = none``: audio is decoded (so bad chunks still fail) but not transcribed."""

    name = "none"

    def transcribe(
        self,
        audio: bytes,
        *,
        content_type: str = "audio/wav",
        sample_rate: int | None = None,
        prompt: str | None = None,
    ) -> Transcript:
        from worldmm.asr.audio import TARGET_RATE, decode_audio

        samples = decode_audio(audio, content_type, sample_rate)
        return Transcript(duration_s=samples.size / TARGET_RATE)


def build_transcriber(settings: Settings) -> Transcriber:
    if settings.asr_backend == "local":
        from worldmm.asr.local import LocalWhisperTranscriber

        return LocalWhisperTranscriber(settings.asr_local_model, beam_size=settings.asr_beam_size)
    if settings.asr_backend == "none":
        return NullTranscriber()
    from worldmm.asr.api import WhisperAPITranscriber
    from worldmm.providers.clients import sync_openai_client
    from worldmm.retry import model_policy

    client = sync_openai_client(settings, base_url=settings.asr_base_url)
    label = "openai" if not settings.asr_base_url else "whisper-api"
    return WhisperAPITranscriber(
        client, settings.asr_model, retry=model_policy(settings), label=label
    )
