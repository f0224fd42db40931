"""Embedding + lexical scoring shared by the offline roles (rerank, merge, answers)."""

from __future__ import annotations

import numpy as np

from worldmm.embed.base import TextEmbedder
from worldmm.llm.rule_based.text import lexical_overlap

LEXICAL_WEIGHT = 0.5


def relevance(embedder: TextEmbedder, query: str, texts: list[str]) -> np.ndarray:
    """Cosine(query, text) plus a weighted share of the query's words found in the text."""
    if not texts:
        return np.zeros(0, dtype=np.float32)
    vectors = embedder.embed([query, *texts])
    cosine = vectors[1:] @ vectors[0]
    lexical = np.asarray([lexical_overlap(query, t) for t in texts], dtype=np.float32)
    return cosine + LEXICAL_WEIGHT * lexical


def mmr_select(
    embedder: TextEmbedder, texts: list[str], k: int, diversity: float = 0.3
) -> list[int]:
    """Indices of ``k`` texts close to the centroid but unlike each other (maximal marginal
    relevance), returned in their original order: an extractive summary keeps time order."""
    if len(texts) <= k:
        return list(range(len(texts)))
    vectors = embedder.embed(texts)
    centroid = vectors.mean(axis=0)
    centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
    central = vectors @ centroid
    chosen: list[int] = []
    while len(chosen) < k:
        if chosen:
            redundancy = (vectors @ vectors[chosen].T).max(axis=1)
        else:
            redundancy = np.zeros(len(texts), dtype=np.float32)
        score = (1 - diversity) * central - diversity * redundancy
        score[chosen] = -np.inf
        chosen.append(int(np.argmax(score)))
    return sorted(chosen)


def near_duplicates(texts: list[str], threshold: float = 0.7) -> list[int]:
    """Indices of texts kept after dropping those whose word set mostly repeats an earlier one."""
    kept: list[int] = []
    sets: list[set[str]] = []
    for i, t in enumerate(texts):
        words = set(t.lower().split())
        if any(len(words & s) / max(len(words | s), 1) >= threshold for s in sets):
            continue
        kept.append(i)
        sets.append(words)
    return kept
