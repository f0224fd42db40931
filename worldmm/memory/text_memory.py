"""What a text becomes in memory: its entities and episodic triples, resolved against the
user's, and its embedding for the dense lane. Every window (and a "remember this" note)
goes through here after its text is known."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from worldmm.memory.entity_resolution import (
    EntityResolution,
    apply_resolutions,
    resolve_entities,
    surface_key,
)
from worldmm.models import Triple
from worldmm.store import segment_search
from worldmm.store import triples as triple_store
from worldmm.store.models import TripleWrite

if TYPE_CHECKING:
    from worldmm.deps import Deps


@dataclass
class TextMemory:
    """Entities and episodic triples extracted from one text, resolved, ready to write."""

    triples: list[Triple]
    resolutions: dict[str, EntityResolution]
    embeddings: np.ndarray
    # The segment's own text embedding (caption + transcript), searched by the dense lane;
    # None when there was no text.
    search_embedding: np.ndarray | None = None


async def extract_text_memory(
    deps: Deps, user_id: str, text: str, search: str | None = None
) -> TextMemory:
    """NER → episodic triples → entity resolution (triple subjects/objects included), and
    the embedding of ``search`` (the segment's searchable text; default ``text``)."""
    search = text if search is None else search
    if not text.strip():
        empty = np.zeros((0, deps.embedder.dim), dtype=np.float32)
        vec = await asyncio.to_thread(deps.embedder.embed, [search]) if search.strip() else None
        return TextMemory([], {}, empty, None if vec is None else vec[0])
    entities = await deps.roles.ner(text)
    triples = await deps.roles.episodic_triples(text, entities) if entities else []
    surfaces = list(entities)
    for t in triples:
        surfaces.append(t.subject)
        if not t.object_is_literal:
            surfaces.append(t.object)
    resolutions = await resolve_entities(deps, user_id, surfaces, text)
    texts = [f"{t.subject} {t.predicate} {t.object}" for t in triples]
    embeddings = (
        await asyncio.to_thread(deps.embedder.embed, texts)
        if texts
        else np.zeros((0, deps.embedder.dim), dtype=np.float32)
    )
    # A call of its own: a batch is padded to its longest text, and a caption is ten times
    # longer than a triple.
    vec = await asyncio.to_thread(deps.embedder.embed, [search]) if search.strip() else None
    return TextMemory(triples, resolutions, embeddings, None if vec is None else vec[0])


def write_search_embedding(conn, deps: Deps, user_id: str, segment_id: int, mem) -> None:
    """The dense lane's row for a segment just written (same transaction)."""
    if mem.search_embedding is not None:
        segment_search.upsert_segment_embeddings(
            conn, user_id, [(segment_id, mem.search_embedding)], deps.embedder.name
        )


def triple_rows(mem: TextMemory, ids: dict[str, int]) -> list[TripleWrite]:
    """The episodic triples of ``mem`` as store rows, entities by resolved id (``ids`` maps
    surface keys to entity ids, as apply_resolutions returns them)."""
    rows = []
    for t, emb in zip(mem.triples, mem.embeddings, strict=True):
        rows.append(
            TripleWrite(
                subject_entity_id=ids[surface_key(t.subject)],
                predicate=t.predicate,
                object_entity_id=None if t.object_is_literal else ids[surface_key(t.object)],
                object_literal=t.object if t.object_is_literal else None,
                embedding=emb,
            )
        )
    return rows


def write_text_memory(conn, deps: Deps, user_id: str, segment_id: int, mem: TextMemory) -> None:
    """The segment's entities, its episodic triples (replacing a replay's) and its dense-lane
    row, in the segment's transaction."""
    ids = apply_resolutions(conn, user_id, mem.resolutions)
    triple_store.replace_episodic_triples(conn, user_id, segment_id, triple_rows(mem, ids))
    write_search_embedding(conn, deps, user_id, segment_id, mem)
