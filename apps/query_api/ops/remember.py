"""An explicit "remember this" note: it becomes episodic and semantic memory of its own.

The note is a 30 s segment ending at ``at`` (so ``as_of=at`` already sees it) whose caption is
the note, marked ``source_topic='note'`` in its provenance. Its memory is built by the same
code as ingest (``worldmm.memory``): NER → episodic triples → entity resolution, then
semantic triples → consolidation. Facts first written by a note carry origin 'remembered'.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from worldmm.deps import Deps
from worldmm.llm.usage import for_user
from worldmm.memory.consolidation import consolidate_semantic
from worldmm.memory.construct import TextMemory, extract_text_memory, triple_rows
from worldmm.memory.entity_resolution import apply_resolutions
from worldmm.models import BASE_SCALE
from worldmm.store import segment_search
from worldmm.store import segments as segment_store
from worldmm.store import triples as triple_store
from worldmm.store.models import SegmentWrite
from worldmm.wire.schemas import RememberRequest, RememberResponse

NOTE_TOPIC = "note"


def is_note(source_topic: str | None) -> bool:
    return source_topic == NOTE_TOPIC


def note_window(at: datetime, taken: set[datetime]) -> tuple[datetime, datetime]:
    """[start, at) for a note: 30 s long, its start nudged off the 30 s grid (and off other
    notes' starts) by whole milliseconds, so it never takes the key of an ingest window."""
    start = at - timedelta(seconds=BASE_SCALE)
    while _on_grid(start) or start in taken:
        start += timedelta(milliseconds=1)
    return start, at


def _on_grid(ts: datetime) -> bool:
    ms = round(ts.timestamp() * 1000)
    return ms % (BASE_SCALE * 1000) == 0


def _write_note(
    deps: Deps, user_id: str, text: str, at: datetime, mem: TextMemory
) -> tuple[int, datetime, datetime]:
    versions = getattr(deps.roles, "versions", {}) or {}
    with deps.db.transaction() as conn:
        # the same note at the same time again is the same memory (idempotent retries)
        rows = conn.execute(
            "SELECT id, window_start, window_end, caption FROM segments WHERE user_id = %s"
            " AND scale_seconds = %s AND window_end = %s AND source_topic = %s FOR UPDATE",
            (user_id, BASE_SCALE, at, NOTE_TOPIC),
        ).fetchall()
        for seg_id, start, end, caption in rows:
            if caption == text:
                return int(seg_id), start, end
        start, end = note_window(at, {r[1] for r in rows})
        segment_id = segment_store.upsert_segment(
            conn,
            SegmentWrite(
                user_id=user_id,
                scale_seconds=BASE_SCALE,
                window_start=start,
                window_end=end,
                caption=text,
                processing_status="complete",
                source_topic=NOTE_TOPIC,
                model_versions={
                    "llm": deps.roles.label,
                    "embed": deps.embedder.name,
                    "origin": "remember",
                },
                prompt_versions={
                    r: versions[r]
                    for r in (
                        "ner",
                        "episodic_triples",
                        "entity_confirm",
                        "semantic_triples",
                        "consolidation",
                    )
                    if r in versions
                },
            ),
        )
        ids = apply_resolutions(conn, user_id, mem.resolutions)
        triple_store.insert_triples(conn, user_id, segment_id, "episodic", triple_rows(mem, ids))
        if mem.search_embedding is not None:  # the dense lane finds notes like any segment
            segment_search.upsert_segment_embeddings(
                conn, user_id, [(segment_id, mem.search_embedding)], deps.embedder.name
            )
    return segment_id, start, end


def _mark_remembered(deps: Deps, user_id: str, segment_id: int) -> list[list[str]]:
    with deps.db.transaction() as conn:
        conn.execute(
            "UPDATE triples SET origin = 'remembered' WHERE user_id = %s AND segment_id = %s"
            " AND memory_type = 'semantic' AND origin = 'extracted'",
            (user_id, segment_id),
        )
        rows = triple_store.triples_for_segments(conn, user_id, [segment_id])
    return [r.as_list() for r in rows if r.memory_type == "semantic"]


async def remember(deps: Deps, user_id: str, req: RememberRequest) -> RememberResponse:
    """Build and store the note's memory (raises ModelCallError when a model call fails)."""
    with for_user(user_id):
        return await _remember(deps, user_id, req)


async def _remember(deps: Deps, user_id: str, req: RememberRequest) -> RememberResponse:
    at = (req.at or deps.clock()).astimezone(UTC)
    mem = await extract_text_memory(deps, user_id, req.text)
    segment_id, start, end = await asyncio.to_thread(_write_note, deps, user_id, req.text, at, mem)
    extraction = await deps.roles.semantic_triples(req.text, mem.triples)
    # serialised per user in the database, with the dataflow and every other API process
    await consolidate_semantic(
        deps, user_id, segment_id, end, extraction.semantic_triples, req.text
    )
    semantic = await asyncio.to_thread(_mark_remembered, deps, user_id, segment_id)
    return RememberResponse(
        segment_id=segment_id,
        start=start,
        end=end,
        entities=sorted({r.canonical_name or r.surface for r in mem.resolutions.values()}),
        episodic_triples=[t.as_list() for t in mem.triples],
        semantic_triples=semantic,
        construction="worldmm.memory (shared with ingest)",
    )
