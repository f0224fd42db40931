"""The text embedder interface and the start-up dimension check."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


class EmbeddingDimensionError(ValueError):
    """The embedder's dimension differs from ``text_embed_dim`` (and so from the schema)."""


@runtime_checkable
class TextEmbedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return float32 ``(len(texts), dim)``, each row L2-normalised."""
        ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def check_dimension(embedder: TextEmbedder, expected: int) -> None:
    if embedder.dim != expected:
        raise EmbeddingDimensionError(
            f"text embedder {embedder.name!r} produces {embedder.dim}-d vectors but "
            f"WORLDMM_TEXT_EMBED_DIM is {expected}; set WORLDMM_TEXT_EMBED_DIM={embedder.dim} "
            "(on a fresh database) or choose an embedder of that size"
        )
