"""Retrieved hits as the passages the response role reads: each segment once, what was said
beside what was seen, the drill-down context kept; facts and frames after them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from worldmm.llm.schemas import Passage
from worldmm.memory.retrieval.results import FrameHit, SegmentHit, TripleHit

if TYPE_CHECKING:
    from worldmm.agent.result import RoundRecord


def segment_passage(hit: SegmentHit) -> Passage:
    return Passage(
        ref=f"S{hit.segment_id}",
        kind="segment",
        start=hit.start,
        end=hit.end,
        said=hit.transcript or "",
        text=hit.text,
        context=hit.context or "",
        segment_id=hit.segment_id,
    )


def fact_passage(hit: TripleHit) -> Passage:
    return Passage(
        ref=f"F{hit.triple_id}",
        kind="fact",
        start=hit.valid_from,
        text=f"{hit.subject} {hit.predicate} {hit.object}.",
    )


def frame_passage(hit: FrameHit, n: int, query: str) -> Passage:
    where = f" (segment {hit.segment_id})" if hit.segment_id is not None else ""
    return Passage(
        ref=f"V{n}",
        kind="frame",
        start=hit.ts,
        text=f"a frame{where} matched the visual search {query!r}",
        segment_id=hit.segment_id,
    )


def hit_passages(
    segments: Iterable[SegmentHit],
    facts: Iterable[TripleHit] = (),
    looked: Iterable[SegmentHit] = (),
    look_weight: float = 1.0,
) -> list[Passage]:
    """Segments first (each id once, first kept), then the segments only an option's own
    search found (``looked``, weighing ``look_weight``), then facts (each id once)."""
    out: dict[str, Passage] = {}
    for hit in segments:
        out.setdefault(f"S{hit.segment_id}", segment_passage(hit))
    for hit in looked:
        ref = f"S{hit.segment_id}"
        if ref not in out:
            out[ref] = segment_passage(hit).model_copy(update={"weight": look_weight})
    for fact in facts:
        out.setdefault(f"F{fact.triple_id}", fact_passage(fact))
    return list(out.values())


def round_passages(rounds: Sequence[RoundRecord]) -> list[Passage]:
    """Every round's hits in retrieval order: segments, facts, then frames."""
    segments = [h for r in rounds for h in r.results if isinstance(h, SegmentHit)]
    facts = [h for r in rounds for h in r.results if isinstance(h, TripleHit)]
    frames: dict[str, Passage] = {}
    for r in rounds:
        for h in r.results:
            if isinstance(h, FrameHit) and h.key not in frames:
                frames[h.key] = frame_passage(h, len(frames) + 1, r.query)
    return [*hit_passages(segments, facts), *frames.values()]
