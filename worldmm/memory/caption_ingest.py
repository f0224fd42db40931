"""Caption-level ingest: windows whose captions already exist (benchmarks such as EgoLife).

Skips ASR, captioning and the visual encoder; everything after the caption (NER, triples,
entity resolution, the 3 min / 10 min / 1 h merges, semantic consolidation) runs through the
same code as the live flow, and the window cascade comes from the same pure logic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from worldmm.llm.usage_ledger import for_user
from worldmm.memory.base_segment import write_base
from worldmm.memory.summary_segment import build_summary_segment
from worldmm.memory.text_memory import extract_text_memory
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.window_rows import model_versions, segment_write
from worldmm.memory.windows import (
    BASE_S,
    BaseWindow,
    CoarseWindow,
    Item,
    SessionEnd,
    WindowCascade,
    WindowConfig,
    align,
    dt_to_ms,
)
from worldmm.store import segment_search

if TYPE_CHECKING:
    from worldmm.deps import Deps

CaptionWindow = tuple[datetime, datetime, str, str]
"""(window start, window end, caption text, transcript text)."""


async def ingest_caption_windows(
    deps: Deps,
    user_id: str,
    windows: Sequence[CaptionWindow],
    *,
    session_id: str = "captions",
    concurrency: int | None = None,
) -> list[WindowOutcome]:
    """Build 30 s segments from given captions, then every coarser level above them.

    The input ends with a session end at the last window's end, so the trailing coarse
    windows are flushed (partial when they did not run to their end).
    """
    if not windows:
        return []
    with for_user(user_id):
        return await _ingest(deps, user_id, windows, session_id, concurrency)


async def _ingest(
    deps: Deps,
    user_id: str,
    windows: Sequence[CaptionWindow],
    session_id: str,
    concurrency: int | None,
) -> list[WindowOutcome]:
    gate = asyncio.Semaphore(concurrency or deps.settings.in_flight_start)
    state = WindowCascade(user_id, WindowConfig(allowed_lateness_s=0))
    text: dict[int, tuple[str, str]] = {}
    items: list[Item | SessionEnd] = []
    for start, _end, caption, transcript in windows:
        start_ms = align(dt_to_ms(start), BASE_S)
        text[start_ms] = (caption, transcript)
        for kind in ("frames", "audio"):  # both streams present: nothing waits on idleness
            items.append(Item(kind, f"c{start_ms}", session_id, start_ms, start_ms + 1))
    last_end = max(dt_to_ms(end) for _s, end, _c, _t in windows)
    items.append(SessionEnd(session_id, last_end))
    events = state.ingest(items, 0.0) + state.eof(0.0)

    async def one_base(w: BaseWindow) -> WindowOutcome:
        async with gate:
            caption, transcript = text[w.start_ms]
            return await build_caption_segment(deps, w, caption, transcript)

    async def one_coarse(w: CoarseWindow) -> WindowOutcome:
        async with gate:
            return await build_summary_segment(deps, w)

    bases = [e for e in events if isinstance(e, BaseWindow)]
    outcomes = list(await asyncio.gather(*(one_base(w) for w in bases)))
    for scale in (180, 600, 3600):  # each level after the one below it is written
        level = [e for e in events if isinstance(e, CoarseWindow) and e.scale_s == scale]
        outcomes += await asyncio.gather(*(one_coarse(w) for w in level))
    return outcomes


async def build_caption_segment(
    deps: Deps, window: BaseWindow, caption: str, transcript: str
) -> WindowOutcome:
    mem = await extract_text_memory(
        deps, window.user_id, caption, segment_search.search_text(caption, transcript)
    )
    models, prompts = model_versions(deps, ["ner", "episodic_triples", "entity_confirm"])
    seg = segment_write(
        window,
        caption=caption or None,
        transcript=transcript or None,
        processing_status="complete",
        model_versions={**models, "caption": "given"},
        prompt_versions=prompts,
    )

    session = window.session_id or "captions"
    segment_id = await asyncio.to_thread(write_base, deps, window, seg, mem, None, session)
    counts = {"entities": len(mem.resolutions), "triples": len(mem.triples)}
    return WindowOutcome.of(window, "complete", segment_id, counts=counts)
