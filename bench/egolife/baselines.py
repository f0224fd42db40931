"""Flat baselines over the same 30 s windows: BM25 (rank_bm25) and dense MiniLM cosine.

The ``as_of`` rule is the one the memory obeys: a window is visible to a question only when
it had closed by the question's time (``window.end <= as_of``). Windows are sorted by time, so
the visible ones are a prefix and the rule is one bisect.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import groupby
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

from bench.egolife.data import WINDOW_S, Window, day_of
from bench.egolife.truth import Ranked
from worldmm.embed.base import TextEmbedder

_TOKEN_RE = re.compile(r"[a-z0-9]+")
EMBED_CHUNK = 256


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.lower())


class _WindowSearch:
    def __init__(self, windows: Sequence[Window]) -> None:
        self.windows = sorted(windows, key=lambda w: w.start)
        self._ends = [w.end.timestamp() for w in self.windows]

    def visible(self, as_of: datetime | None) -> int:
        """How many windows (a prefix) had closed by ``as_of``."""
        if as_of is None:
            return len(self.windows)
        return bisect.bisect_right(self._ends, as_of.timestamp())

    def _top(self, scores: np.ndarray, as_of: datetime | None, k: int) -> list[Ranked]:
        n = self.visible(as_of)
        if n == 0 or k <= 0:
            return []
        head = np.asarray(scores[:n], dtype=np.float64)
        k = min(k, n)
        # stable order among equal scores: the earlier window first
        idx = np.argpartition(-head, k - 1)[:k] if k < n else np.arange(n)
        idx = sorted(idx.tolist(), key=lambda i: (-head[i], i))
        return [
            Ranked(start=self.windows[i].start, end=self.windows[i].end, scale=WINDOW_S)
            for i in idx
        ]


class Bm25Search(_WindowSearch):
    """Okapi BM25 over each window's caption + transcript (IDF over all windows: a corpus
    statistic, not content, so it does not leak future text into a past query's ranking)."""

    name = "bm25"

    def __init__(self, windows: Sequence[Window]) -> None:
        super().__init__(windows)
        corpus = [tokenize(w.text) or ["<empty>"] for w in self.windows]
        self._bm25 = BM25Okapi(corpus)

    def search(self, query: str, as_of: datetime | None, k: int) -> list[Ranked]:
        terms = tokenize(query)
        if not terms:
            return []
        return self._top(self._bm25.get_scores(terms), as_of, k)


def embed_texts(
    texts: Sequence[str],
    embedder: TextEmbedder,
    on_progress: Callable[[int], None] | None = None,
    cache_dir: Path | None = None,
) -> np.ndarray:
    """Embed ``texts`` in chunks; with ``cache_dir``, reuse a matrix saved for exactly these
    texts and this embedder (the key hashes both), since a week of windows takes minutes."""
    path = None
    if cache_dir is not None:
        digest = hashlib.sha256(embedder.name.encode())
        for t in texts:
            digest.update(t.encode() + b"\0")
        path = cache_dir / f"dense-{digest.hexdigest()[:24]}.npy"
        if path.exists():
            matrix = np.load(path)
            if matrix.shape == (len(texts), embedder.dim):
                if on_progress:
                    on_progress(len(texts))
                return matrix
    parts = []
    for i in range(0, len(texts), EMBED_CHUNK):
        chunk = list(texts[i : i + EMBED_CHUNK])
        parts.append(embedder.embed(chunk))
        if on_progress:
            on_progress(len(chunk))
    matrix = np.vstack(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, matrix)
        tmp.replace(path)
    return matrix


class DenseSearch(_WindowSearch):
    """Cosine between the query and each window's text, both embedded by ``embedder``."""

    name = "dense"

    def __init__(
        self,
        windows: Sequence[Window],
        embedder: TextEmbedder,
        on_progress: Callable[[int], None] | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        super().__init__(windows)
        self._embedder = embedder
        # one cached matrix per day, so a longer run reuses the days a shorter one embedded
        parts = [
            embed_texts([w.text for w in day], embedder, on_progress, cache_dir)
            for _day, day in groupby(self.windows, key=lambda w: day_of(w.start))
        ]
        self._matrix = np.vstack(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)

    def search(self, query: str, as_of: datetime | None, k: int) -> list[Ranked]:
        return self.search_vector(self._embedder.embed([query])[0], as_of, k)

    def search_vector(self, vector: np.ndarray, as_of: datetime | None, k: int) -> list[Ranked]:
        return self._top(self._matrix @ vector, as_of, k)
