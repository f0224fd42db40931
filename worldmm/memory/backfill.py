"""Backfill: text embeddings for segments written before the dense lane existed (or by
another embedding model). Resumable and idempotent: each batch is committed on its own, and
a segment is picked up only while it has no embedding by the current model."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from worldmm.embed.base import TextEmbedder
from worldmm.store import segment_search
from worldmm.store.db import Database


@dataclass
class BackfillReport:
    total: int  # segments that needed an embedding when the run began
    written: int
    seconds: float


def backfill_segment_embeddings(
    db: Database,
    embedder: TextEmbedder,
    *,
    user_id: str | None = None,
    batch_size: int = 64,
    on_total: Callable[[int], None] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> BackfillReport:
    """Embed every complete segment with text that lacks an embedding by ``embedder`` (one
    user's, or everyone's when ``user_id`` is None), ``batch_size`` segments at a time."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    started = time.perf_counter()
    with db.connection() as conn:
        total = segment_search.count_missing_embeddings(conn, embedder.name, user_id)
    if on_total:
        on_total(total)
    written, after = 0, 0
    while True:
        with db.connection() as conn:
            rows = segment_search.missing_embeddings(
                conn, embedder.name, user_id, after, batch_size
            )
        if not rows:
            break
        vectors = embedder.embed(
            [segment_search.search_text(r.caption, r.transcript) for r in rows]
        )
        with db.transaction() as conn:
            for row, vec in zip(rows, vectors, strict=True):
                written += segment_search.upsert_segment_embeddings(
                    conn, row.user_id, [(row.segment_id, vec)], embedder.name
                )
        after = rows[-1].segment_id
        if on_batch:
            on_batch(len(rows))
    return BackfillReport(total, written, time.perf_counter() - started)
