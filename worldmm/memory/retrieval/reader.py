"""The read port of retrieval: what retrievers read memory through, and its result shapes.

It sits below both :mod:`worldmm.memory.retrieval.deps` (which bundles a reader with the
models) and :mod:`worldmm.memory.retrieval.pg_reader` (the PostgreSQL adapter), so neither
imports the other for these types.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import numpy as np
from pydantic import AwareDatetime, BaseModel

from worldmm.graph.types import GraphMemoryType, GraphTriple, GraphTripleLike
from worldmm.models import SegmentRecord


class ClipMatch(BaseModel):
    """A visual clip (one 30 s segment's embedding) matched by cosine."""

    segment_id: int
    start: AwareDatetime
    end: AwareDatetime
    score: float


class FrameRef(BaseModel):
    key: str
    ts: AwareDatetime


class MemoryReader(Protocol):
    """Reads one user's memory; every method filters by ``user_id`` (and ``as_of``)."""

    def graph_fingerprint(
        self, user_id: str, memory_type: GraphMemoryType, scale: int | None = None
    ) -> str:
        """Changes whenever the rows of the current graph change (cache freshness check)."""
        ...

    def graph_history(
        self,
        user_id: str,
        memory_type: GraphMemoryType,
        scale: int | None = None,
        *,
        id_range: tuple[int, int] | None = None,
    ) -> Sequence[GraphTripleLike]:
        """Every row of a graph whatever its time, soft-deleted semantic ones included, each
        with ``valid_from`` and ``invalidated_at``, oldest id first; ``id_range=(after,
        upto]`` only those ids. A time-masked graph is built from these."""
        ...

    def top_triples(
        self,
        user_id: str,
        memory_type: GraphMemoryType,
        embedding: np.ndarray,
        k: int,
        scale: int | None = None,
        as_of: datetime | None = None,
    ) -> list[tuple[GraphTriple, float]]: ...

    def triples_by_id(self, user_id: str, ids: Sequence[int]) -> list[GraphTriple]: ...

    def nearest_entities(
        self, user_id: str, embedding: np.ndarray, min_cosine: float, k: int
    ) -> list[tuple[str, float]]: ...

    def segments(self, user_id: str, ids: Sequence[int]) -> list[SegmentRecord]: ...

    def search_visual(
        self, user_id: str, embedding: np.ndarray, k: int, as_of: datetime | None = None
    ) -> list[ClipMatch]: ...

    def frames(
        self, user_id: str, start: datetime, end: datetime, limit: int
    ) -> list[FrameRef]: ...
