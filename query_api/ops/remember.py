"""An explicit "remember this" note: a 30 s segment ending at ``at`` whose caption is the
note, built into episodic and semantic memory by the same code as ingest.

A note is the wearer saying "this matters": importance 1.0, and a strong recall of itself and
its facts. A near-copy of a recent note recalls that note instead of storing another
(``merged_into``), decided under the user's advisory lock so that two copies sent at once
store one note. The settings: docs/api.md.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg

from worldmm.deps import Deps
from worldmm.llm.usage_ledger import for_user
from worldmm.memory.consolidation import consolidate_semantic
from worldmm.memory.entity_resolution import apply_resolutions
from worldmm.memory.importance import NOTE_IMPORTANCE
from worldmm.memory.text_memory import (
    TextMemory,
    extract_text_memory,
    triple_rows,
    write_search_embedding,
)
from worldmm.models import BASE_SCALE
from worldmm.store import segments as segment_store
from worldmm.store import triples as triple_store
from worldmm.store.importance_recall import nearest_note, reinforce
from worldmm.store.locks import lock_consolidation
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


@dataclass(frozen=True)
class Stored:
    """Where a note went: its segment (a new one, the same note sent again, or the earlier
    note it merged into)."""

    segment_id: int
    start: datetime
    end: datetime
    merged: bool = False
    retry: bool = False


def _same_time_notes(conn: psycopg.Connection, user_id: str, at: datetime) -> list[tuple]:
    return conn.execute(
        "SELECT id, window_start, window_end, caption FROM segments WHERE user_id = %s"
        " AND scale_seconds = %s AND window_end = %s AND source_topic = %s FOR UPDATE",
        (user_id, BASE_SCALE, at, NOTE_TOPIC),
    ).fetchall()


def _find_existing(
    deps: Deps, conn: psycopg.Connection, user_id: str, text: str, at: datetime, vec
) -> tuple[Stored | None, list[tuple]]:
    """The same note at the same time (an idempotent retry: stored as it was), else a recent
    note within the merge threshold; and the notes ending at ``at`` (their window starts are
    taken)."""
    rows = _same_time_notes(conn, user_id, at)
    for seg_id, start, end, caption in rows:
        if caption == text:
            return Stored(int(seg_id), start, end, retry=True), rows
    span = timedelta(hours=deps.settings.note_merge_span_h)
    if vec is None or span <= timedelta(0):
        return None, rows
    near = nearest_note(conn, user_id, vec, at - span, at + span)
    if near is None or near[1] < deps.settings.note_merge_threshold:
        return None, rows
    seg = segment_store.get_segment(conn, user_id, near[0])
    assert seg is not None  # read in this transaction
    return Stored(seg.id, seg.window_start, seg.window_end, merged=True), rows


def _recall_note(conn: psycopg.Connection, deps: Deps, user_id: str, segment_id: int) -> None:
    """A note is a strong recall of itself and of the facts it holds."""
    strength = deps.settings.note_recall_strength
    facts = [
        r.id
        for r in triple_store.triples_for_segments(conn, user_id, [segment_id])
        if r.memory_type == "semantic"
    ]
    reinforce(
        conn,
        user_id,
        {segment_id: strength},
        dict.fromkeys(facts, strength),
        deps.clock(),
    )


def _merge_duplicate(deps: Deps, user_id: str, text: str, at: datetime, vec) -> Stored | None:
    """Before any model call: a duplicate of a recent note is recalled and nothing else
    happens (None: no duplicate, or the same note again, which is built as before)."""
    with deps.db.transaction() as conn:
        lock_consolidation(conn, user_id)
        found, _ = _find_existing(deps, conn, user_id, text, at, vec)
        if found is None or not found.merged:
            return None
        _recall_note(conn, deps, user_id, found.segment_id)
        return found


def _write_note(deps: Deps, user_id: str, text: str, at: datetime, mem: TextMemory) -> Stored:
    versions = getattr(deps.roles, "versions", {}) or {}
    with deps.db.transaction() as conn:
        # checked again under the lock: a duplicate may have been stored since the first look
        lock_consolidation(conn, user_id)
        found, rows = _find_existing(deps, conn, user_id, text, at, mem.search_embedding)
        if found is not None:
            if found.merged:
                _recall_note(conn, deps, user_id, found.segment_id)
            return found
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
                importance=NOTE_IMPORTANCE,
                importance_source="note",
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
        write_search_embedding(conn, deps, user_id, segment_id, mem)  # found like any segment
    return Stored(segment_id, start, end)


def _mark_remembered(deps: Deps, user_id: str, segment_id: int, recall: bool) -> list[list[str]]:
    with deps.db.transaction() as conn:
        conn.execute(
            "UPDATE triples SET origin = 'remembered' WHERE user_id = %s AND segment_id = %s"
            " AND memory_type = 'semantic' AND origin = 'extracted'",
            (user_id, segment_id),
        )
        if recall:  # a new note (a retry of one is not recalled twice)
            _recall_note(conn, deps, user_id, segment_id)
        rows = triple_store.triples_for_segments(conn, user_id, [segment_id])
    return [r.as_list() for r in rows if r.memory_type == "semantic"]


def _merged_reply(deps: Deps, user_id: str, stored: Stored) -> RememberResponse:
    """The reply for a note merged into an earlier one: that note's memory."""
    with deps.db.connection() as conn:
        rows = triple_store.triples_for_segments(conn, user_id, [stored.segment_id])
    return RememberResponse(
        segment_id=stored.segment_id,
        start=stored.start,
        end=stored.end,
        merged_into=stored.segment_id,
        entities=sorted(
            {r.subject_name for r in rows}
            | {r.object_name for r in rows if r.object_entity_id is not None}
        ),
        episodic_triples=[r.as_list() for r in rows if r.memory_type == "episodic"],
        semantic_triples=[r.as_list() for r in rows if r.memory_type == "semantic"],
        construction="worldmm.memory (shared with ingest)",
    )


async def remember(deps: Deps, user_id: str, req: RememberRequest) -> RememberResponse:
    """Build and store the note's memory, or recall the recent note it repeats (raises
    ModelCallError when a model call fails)."""
    with for_user(user_id):
        return await _remember(deps, user_id, req)


async def _remember(deps: Deps, user_id: str, req: RememberRequest) -> RememberResponse:
    at = (req.at or deps.clock()).astimezone(UTC)
    vec = np.asarray((await asyncio.to_thread(deps.embedder.embed, [req.text]))[0])
    merged = await asyncio.to_thread(_merge_duplicate, deps, user_id, req.text, at, vec)
    if merged is not None:  # no model call: the earlier note holds this memory already
        return await asyncio.to_thread(_merged_reply, deps, user_id, merged)
    mem = await extract_text_memory(deps, user_id, req.text)
    stored = await asyncio.to_thread(_write_note, deps, user_id, req.text, at, mem)
    if stored.merged:  # a copy sent at the same time was stored first
        return await asyncio.to_thread(_merged_reply, deps, user_id, stored)
    segment_id, start, end = stored.segment_id, stored.start, stored.end
    extraction = await deps.roles.semantic_triples(req.text, mem.triples)
    # serialised per user in the database, with the dataflow and every other API process
    await consolidate_semantic(
        deps, user_id, segment_id, end, extraction.semantic_triples, req.text
    )
    semantic = await asyncio.to_thread(
        _mark_remembered, deps, user_id, segment_id, not stored.retry
    )
    return RememberResponse(
        segment_id=segment_id,
        start=start,
        end=end,
        entities=sorted({r.canonical_name or r.surface for r in mem.resolutions.values()}),
        episodic_triples=[t.as_list() for t in mem.triples],
        semantic_triples=semantic,
        construction="worldmm.memory (shared with ingest)",
    )
