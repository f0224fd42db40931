"""Transcripts and the transcriber interface."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field


class AudioDecodeError(ValueError):
    """The audio chunk cannot be decoded (bad header, unknown codec, truncated data)."""


class TranscriptSegment(BaseModel):
    start_s: float = Field(ge=0)
    end_s: float = Field(ge=0)
    text: str


class Transcript(BaseModel):
    """``text`` is empty for silence; segment times are relative to the chunk start."""

    text: str = ""
    segments: list[TranscriptSegment] = Field(default_factory=list)
    language: str | None = None
    duration_s: float = 0.0


@runtime_checkable
class Transcriber(Protocol):
    name: str

    def transcribe(
        self,
        audio: bytes,
        *,
        content_type: str = "audio/wav",
        sample_rate: int | None = None,
        prompt: str | None = None,
    ) -> Transcript: ...
