"""What the retrieval agent returns: the answer and everything it was grounded on."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from worldmm.agent.choices import ChoiceAnswer
from worldmm.memory.retrieval.results import (
    FrameHit,
    RetrievalResult,
    SegmentHit,
    TripleHit,
)
from worldmm.models import MemoryType

StopReason = Literal["answer", "max_rounds", "parse_error", "model_error"]


class RoundRecord(BaseModel):
    """One search the agent made. ``repeated``: the same search was asked again and the
    earlier results were reused instead of searching twice."""

    memory_type: MemoryType
    query: str
    results: list[SegmentHit] | list[TripleHit] | list[FrameHit]
    note: str | None = None
    repeated: bool = False

    @classmethod
    def of(cls, result: RetrievalResult, repeated: bool = False) -> RoundRecord:
        return cls(
            memory_type=result.memory_type,
            query=result.query,
            results=result.hits,
            note=result.note,
            repeated=repeated,
        )

    def as_result(self) -> RetrievalResult:
        return RetrievalResult(
            memory_type=self.memory_type, query=self.query, hits=self.results, note=self.note
        )


class AgentResult(BaseModel):
    answer: str
    rounds: list[RoundRecord]
    # distinct segments over all rounds, in order of retrieval: the hit that first brought each
    evidence: list[SegmentHit]
    triples: list[TripleHit]  # distinct semantic facts over all rounds
    frames: list[str]  # distinct frame blob keys over all rounds
    label: str  # which model provider answered ("offline", "openai:gpt-5", ...)
    stopped: StopReason  # why the search loop ended
    choice: ChoiceAnswer | None = None  # set when the question came with choices
    # The segments (windows) the answer cites, among ``evidence``, in the answerer's order.
    cited_segment_ids: list[int] = Field(default_factory=list)
    asked_at: AwareDatetime | None = None  # the moment the question was read at (UTC)
    timezone: str | None = None  # the wearer's zone it was read in

    @classmethod
    def assemble(
        cls,
        answer: str,
        rounds: list[RoundRecord],
        label: str,
        stopped: StopReason,
        choice: ChoiceAnswer | None = None,
        cited: list[str] | None = None,
    ) -> AgentResult:
        """``cited``: the passage refs the free-form answer rests on ("S12"); with a
        choice, the segments the choice rests on are cited."""
        evidence: dict[int, SegmentHit] = {}
        triples: dict[int, TripleHit] = {}
        frames: dict[str, None] = {}
        for r in rounds:
            for hit in r.results:
                if isinstance(hit, SegmentHit):
                    evidence.setdefault(hit.segment_id, hit)
                elif isinstance(hit, TripleHit):
                    triples.setdefault(hit.triple_id, hit)
                else:
                    frames.setdefault(hit.key, None)
        if choice is not None:
            cited_ids = list(choice.evidence_segment_ids)
        else:
            cited_ids = [int(r[1:]) for r in cited or [] if r[:1] == "S" and r[1:].isdigit()]
        return cls(
            answer=answer,
            rounds=rounds,
            evidence=list(evidence.values()),
            triples=list(triples.values()),
            frames=list(frames),
            label=label,
            stopped=stopped,
            choice=choice,
            cited_segment_ids=[i for i in dict.fromkeys(cited_ids) if i in evidence],
        )
