"""A closed 3 min / 10 min / 1 h window's memory: its children's captions merged into a
summary, the summary's text memory and parent links; at 10 min also semantic triples,
consolidated against the user's facts.

A run of one caption repeated (windows that carried the caption before them, or summaries of
such windows) is given to the merge once; when only one caption is left there is nothing to
merge, and it becomes the summary without a model call (``model_versions["merge_captions"]``
says so), as a still window takes the caption before it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from worldmm.memory.consolidation import consolidate_semantic
from worldmm.memory.forget_fence import check_fence
from worldmm.memory.importance import summary_rating
from worldmm.memory.text_memory import TextMemory, extract_text_memory, write_text_memory
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.window_rows import model_versions, segment_write, write_paused
from worldmm.memory.windows import TEN_MIN_S, CoarseWindow, children_of, ms_to_dt
from worldmm.store import segments as segment_store
from worldmm.store import users as user_store
from worldmm.store.models import SegmentRow

if TYPE_CHECKING:
    from worldmm.deps import Deps

NOT_MERGED = "none: one caption"  # model_versions["merge_captions"] of a summary made by none


async def build_summary_segment(deps: Deps, window: CoarseWindow) -> WindowOutcome:
    """Merge the children's captions into this window's summary and extract its memory."""
    children = await asyncio.to_thread(load_children, deps, window)
    if children and all(c.processing_status == "paused" for c in children):
        segment_id = await asyncio.to_thread(write_paused, deps, window, children)
        return WindowOutcome.of(window, "paused", segment_id, counts={"children": len(children)})
    captions = distinct_runs(
        [c.caption for c in children if c.processing_status == "complete" and c.caption]
    )
    if len(captions) > 1:
        summary = await deps.roles.merge_captions(captions, window.scale_s)
    else:
        summary = captions[0] if captions else ""
    mem = await extract_text_memory(deps, window.user_id, summary)
    models, prompts = model_versions(deps, ["merge_captions", "ner", "episodic_triples"])
    if len(captions) == 1:
        models["merge_captions"] = NOT_MERGED
        prompts.pop("merge_captions", None)
    failed_children = [c.id for c in children if c.processing_status == "failed"]
    seg = segment_write(
        window,
        caption=summary or None,
        processing_status="complete",
        error=f"children failed: {failed_children}" if failed_children else None,
        model_versions=models,
        prompt_versions=prompts,
        **summary_rating(summary, (c.importance for c in children)),
    )
    segment_id = await asyncio.to_thread(_write_summary, deps, window, seg, mem, children)
    counts = {
        "children": len(children),
        "entities": len(mem.resolutions),
        "triples": len(mem.triples),
    }
    if window.scale_s == TEN_MIN_S and summary:
        extraction = await deps.roles.semantic_triples(summary, mem.triples)
        # serialised per user in the database (worldmm.memory.consolidation)
        stats = await consolidate_semantic(
            deps,
            window.user_id,
            segment_id,
            ms_to_dt(window.end_ms),
            extraction.semantic_triples,
            summary,
        )
        counts.update(
            semantic=len(extraction.semantic_triples),
            semantic_updated=stats.updated,
            semantic_invalidated=stats.invalidated,
            semantic_redecided=stats.retried,
        )
    return WindowOutcome.of(window, "complete", segment_id, counts=counts)


def distinct_runs(captions: list[str]) -> list[str]:
    """``captions`` in order, each run of one repeated caption given once."""
    return [c for i, c in enumerate(captions) if i == 0 or c != captions[i - 1]]


def load_children(deps: Deps, window: CoarseWindow) -> list[SegmentRow]:
    """Every stored child of the window (a re-closed window also sees earlier sessions')."""
    wanted = {(s, ms_to_dt(start)) for s, start in children_of(window.wid)}
    with deps.db.connection() as conn:
        rows = segment_store.list_segments(
            conn, window.user_id, ms_to_dt(window.start_ms), ms_to_dt(window.end_ms)
        )
    return [r for r in rows if (r.scale_seconds, r.window_start) in wanted]


def _write_summary(deps, window: CoarseWindow, seg, mem: TextMemory, children) -> int:
    user = window.user_id
    with deps.db.transaction() as conn:
        check_fence(conn)  # a forget since the build started: built again
        user_store.ensure_user(conn, user)
        segment_id = segment_store.upsert_segment(conn, seg)
        segment_store.link_children(conn, user, segment_id, [c.id for c in children])
        write_text_memory(conn, deps, user, segment_id, mem)
    return segment_id
