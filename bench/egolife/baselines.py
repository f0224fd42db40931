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

EMBED_CHUNK = 256
Progress = Callable[[int], None]


def tokenize(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class WindowSearch:
    """The windows, time-sorted; a subclass scores them all (``scores``) for a query."""

    def __init__(self, windows: Sequence[Window]) -> None:
        self.windows = sorted(windows, key=lambda w: w.start)
        self._ends = [w.end.timestamp() for w in self.windows]

    def scores(self, query: str) -> np.ndarray | None:
        raise NotImplementedError

    def search(self, query: str, as_of: datetime | None, k: int) -> list[Ranked]:
        """The top ``k`` windows closed by ``as_of`` (all when None), best first."""
        n = len(self._ends) if as_of is None else bisect.bisect_right(self._ends, as_of.timestamp())
        scores = self.scores(query) if n and k > 0 else None
        if scores is None:
            return []
        head, k = np.asarray(scores[:n], dtype=np.float64), min(k, n)
        # stable order among equal scores: the earlier window first
        idx = np.argpartition(-head, k - 1)[:k] if k < n else np.arange(n)
        idx = sorted(idx.tolist(), key=lambda i: (-head[i], i))
        return [
            Ranked(start=self.windows[i].start, end=self.windows[i].end, scale=WINDOW_S)
            for i in idx
        ]


class Bm25Search(WindowSearch):
    """Okapi BM25 over each window's caption + transcript (IDF over all windows: a corpus
    statistic, not content, so it does not leak future text into a past query's ranking)."""

    def __init__(self, windows: Sequence[Window]) -> None:
        super().__init__(windows)
        self._bm25 = BM25Okapi([tokenize(w.text) or ["<empty>"] for w in self.windows])

    def scores(self, query: str) -> np.ndarray | None:
        terms = tokenize(query)
        return self._bm25.get_scores(terms) if terms else None


def embed_texts(
    texts: Sequence[str], embedder: TextEmbedder, step: Progress | None, cache_dir: Path | None
) -> np.ndarray:
    """Embed ``texts`` in chunks; with ``cache_dir``, reuse a matrix saved for exactly these
    texts and this embedder (the key hashes both), since a week of windows takes minutes."""
    step = step or (lambda _n: None)
    path = None
    if cache_dir is not None:
        digest = hashlib.sha256(embedder.name.encode())
        for t in texts:
            digest.update(t.encode() + b"\0")
        path = cache_dir / f"dense-{digest.hexdigest()[:24]}.npy"
        if path.exists() and (matrix := np.load(path)).shape == (len(texts), embedder.dim):
            step(len(texts))
            return matrix
    parts = [np.zeros((0, embedder.dim), dtype=np.float32)]
    for i in range(0, len(texts), EMBED_CHUNK):
        parts.append(embedder.embed(list(texts[i : i + EMBED_CHUNK])))
        step(len(parts[-1]))
    matrix = np.vstack(parts)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(tmp := path.with_suffix(".tmp.npy"), matrix)
        tmp.replace(path)
    return matrix


class DenseSearch(WindowSearch):
    """Cosine between the query and each window's text, both embedded by ``embedder``."""

    def __init__(
        self,
        windows: Sequence[Window],
        embedder: TextEmbedder,
        on_progress: Progress | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        super().__init__(windows)
        self._embedder = embedder
        # one cached matrix per day, so a longer run reuses the days a shorter one embedded
        days = groupby(self.windows, key=lambda w: day_of(w.start))
        parts = [
            embed_texts([w.text for w in d], embedder, on_progress, cache_dir) for _, d in days
        ]
        self._matrix = np.vstack([np.zeros((0, embedder.dim), dtype=np.float32), *parts])

    def scores(self, query: str) -> np.ndarray:
        return self._matrix @ self._embedder.embed([query])[0]
