"""A bounded text → vector memo in front of an embedder, for the offline answerer.

Answers embed the sentences of the passages they are given; the same windows come back
question after question (and method after method in a benchmark), so their sentences are
embedded once. Least recently used entries go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from worldmm.embed.base import TextEmbedder

DEFAULT_MAX_TEXTS = 20_000  # 384-d float32: about 30 MB


class MemoEmbedder:
    def __init__(self, inner: TextEmbedder, max_texts: int = DEFAULT_MAX_TEXTS) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_texts = max_texts
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # answers run in worker threads

    def embed(self, texts: list[str]) -> np.ndarray:
        # The vectors already held are taken under the lock, with the texts still missing:
        # another thread may evict them before this call ends, so nothing is read back later.
        with self._lock:
            held = {t: self._memo[t] for t in dict.fromkeys(texts) if t in self._memo}
            for text in held:
                self._memo.move_to_end(text)
        missing = [t for t in dict.fromkeys(texts) if t not in held]
        # Embed outside the lock: another thread may embed the same text meanwhile (harmless).
        if missing:
            fresh = self.inner.embed(missing)
            held.update(zip(missing, fresh, strict=True))
            with self._lock:
                for text, vector in zip(missing, fresh, strict=True):
                    self._memo[text] = vector
                while len(self._memo) > self.max_texts:
                    self._memo.popitem(last=False)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([held[t] for t in texts]).astype(np.float32, copy=False)
