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
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        # Embed outside the lock: another thread may embed the same text meanwhile (harmless).
        fresh = self.inner.embed(missing) if missing else np.zeros((0, self.dim), np.float32)
        with self._lock:
            for text, vector in zip(missing, fresh, strict=True):
                self._memo[text] = vector
            rows = []
            for text in texts:
                vector = self._memo.get(text)
                if vector is None:  # evicted by this very call (more texts than the memo holds)
                    vector = fresh[missing.index(text)]
                else:
                    self._memo.move_to_end(text)
                rows.append(vector)
            while len(self._memo) > self.max_texts:
                self._memo.popitem(last=False)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)
