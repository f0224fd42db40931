"""The visual encoder contract and its typed errors."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


class EncoderError(Exception):
    """Base of the visual encoder's errors."""


class EncoderUnavailable(EncoderError):
    """The encoder cannot answer now (service down, timing out, overloaded, circuit open).

    Callers degrade: ingest marks the clip's visual embedding pending, the query agent returns
    no visual results. Retrying later may succeed.
    """


class EncoderRejected(EncoderError):
    """The encoder refused this input or answered something unusable; retrying will not help."""


@runtime_checkable
class VisualEncoder(Protocol):
    """Clips (up to 16 JPEG frames) and query texts into one L2-normalised space of ``dim``."""

    dim: int

    async def encode_video(self, frames: list[bytes]) -> np.ndarray: ...

    async def encode_text(self, text: str) -> np.ndarray: ...
