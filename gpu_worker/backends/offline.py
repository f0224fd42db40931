"""The offline CPU backend: the algorithm of worldmm/encoder/offline.py behind the service."""

from __future__ import annotations

import numpy as np
from PIL import Image

from worldmm.encoder.offline import OfflineVisualEmbedder


class OfflineBackend:
    name = "offline"
    device = "cpu"

    def __init__(self, dim: int, *, ocr_frames: int = 4) -> None:
        self._embedder = OfflineVisualEmbedder(dim, ocr_frames=ocr_frames)
        self.dim = dim
        self.model = OfflineVisualEmbedder.description

    def encode_videos(self, clips: list[list[Image.Image]]) -> np.ndarray:
        return self._embedder.embed_videos(clips)

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        return self._embedder.embed_texts(texts)
