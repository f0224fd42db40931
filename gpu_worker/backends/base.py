"""What every encoder backend of the service provides."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from PIL import Image


class EncoderBackend(Protocol):
    """Encodes batches; called from one worker thread at a time (never concurrently)."""

    name: str  # "vlm2vec" | "offline"
    model: str  # what is loaded: a directory, or a description of the offline algorithm
    dim: int
    device: str

    def encode_videos(self, clips: list[list[Image.Image]]) -> np.ndarray:
        """(len(clips), dim) float32, each row L2-normalised."""
        ...

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row L2-normalised, same space as the videos."""
        ...
