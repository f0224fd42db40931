"""Answer a question from one user's memory with the retrieval agent.

A question without ``as_of`` is read at the moment it is asked (the bundle's clock) in the
user's zone, and sees only the memory that existed then, exactly as with ``as_of``. The reply
speaks the wearer's clock: its times carry the wearer's offset, and each piece of evidence
says when as a person would ("yesterday at 15:02").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import quote

from worldmm.agent import AgentResult, answer_question
from worldmm.deps import Deps
from worldmm.localtime import Asked, in_zone, zone
from worldmm.memory.recall_queue import RecallQueue, answer_evidence
from worldmm.memory.retrieval.results import Hit
from worldmm.store.input_gaps import InputGapSpan, gaps_in, list_gaps
from worldmm.wire.schemas import (
    ChoiceOut,
    CitedOut,
    EvidenceOut,
    QueryRequest,
    QueryResponse,
    RoundOut,
    TripleOut,
)


class RoundsOutOfRange(ValueError):
    """max_rounds above what the server allows."""


def frame_url(user_id: str, key: str) -> str:
    """The API path serving a frame's JPEG (keys hold '/', kept as path separators)."""
    return f"/v1/users/{quote(user_id, safe='@')}/frames/{quote(key, safe='/@')}"


def check_rounds(deps: Deps, max_rounds: int | None) -> int | None:
    limit = deps.settings.agent_max_rounds
    if max_rounds is not None and not 1 <= max_rounds <= limit:
        raise RoundsOutOfRange(f"max_rounds must be between 1 and {limit}, got {max_rounds}")
    return max_rounds


async def run_query(
    deps: Deps,
    user_id: str,
    req: QueryRequest,
    *,
    url_of: Callable[[str, str], str] = frame_url,
    recalls: RecallQueue | None = None,
) -> QueryResponse:
    """Run the agent (raises ModelCallError when the model fails to answer). What the answer
    rests on is queued in ``recalls`` (reinforcement, written later in a batch)."""
    rounds = check_rounds(deps, req.max_rounds)
    result = await answer_question(
        deps if rounds is None else deps.with_settings(agent_max_rounds=rounds),
        user_id,
        req.question,
        choices=req.choices,
        as_of=req.as_of,
    )
    if recalls is not None:
        recalls.add(user_id, *answer_evidence(result))
    gaps = await asyncio.to_thread(_evidence_gaps, deps, user_id, result)
    return to_response(result, user_id, req, url_of, gaps)


def _evidence_gaps(deps: Deps, user_id: str, result: AgentResult) -> list[InputGapSpan]:
    """The user's lost input over the evidence's span (one query; none without evidence)."""
    if not result.evidence:
        return []
    start = min(e.start for e in result.evidence)
    with deps.db.connection() as conn:
        return list_gaps(conn, user_id, start, max(e.end for e in result.evidence))


def to_response(
    result: AgentResult,
    user_id: str,
    req: QueryRequest,
    url_of: Callable[[str, str], str] = frame_url,
    gaps: list[InputGapSpan] | None = None,
) -> QueryResponse:
    choice = result.choice
    asked = None
    if result.asked_at is not None:
        asked = Asked(result.asked_at, zone(result.timezone))
    evidence = [
        evidence_out(
            {**e.model_dump(), "input_lost": bool(gaps_in(gaps or [], e.start, e.end))}, asked
        )
        for e in result.evidence
    ]
    return QueryResponse(
        answer=result.answer,
        choice=None if choice is None else ChoiceOut.model_validate(choice.model_dump()),
        provider=result.label,
        as_of=req.as_of,
        asked_at=asked.local if asked else None,
        timezone=result.timezone,
        stopped=result.stopped,
        rounds=[
            RoundOut(
                memory_type=r.memory_type,
                query=r.query,
                results=[hit_json(h, user_id, url_of) for h in r.results],
                note=r.note,
                repeated=r.repeated,
            )
            for r in result.rounds
        ],
        evidence=evidence,
        cited=[
            CitedOut(segment_id=e.segment_id, start=e.start, end=e.end)
            for i in result.cited_segment_ids
            for e in evidence
            if e.segment_id == i
        ],
        triples=[TripleOut.model_validate(t.model_dump()) for t in result.triples],
        frames=[url_of(user_id, key) for key in result.frames],
    )


def evidence_out(evidence: dict, asked: Asked | None) -> EvidenceOut:
    """A segment the answer rests on, its times on the wearer's clock and said as a person
    would ("yesterday at 15:02")."""
    out = EvidenceOut.model_validate(evidence)
    if asked is None:
        return out
    start, end = in_zone(out.start, asked.tz), in_zone(out.end, asked.tz)
    return out.model_copy(update={"start": start, "end": end, "when": asked.spoken(start)})


def hit_json(hit: Hit, user_id: str, url_of: Callable[[str, str], str] = frame_url) -> dict:
    """A search hit on the wire; a frame gets a URL the caller can fetch with the same key."""
    data = hit.model_dump(mode="json")
    if "key" in data:
        data["url"] = url_of(user_id, data["key"])
    return data
