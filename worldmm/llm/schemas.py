"""Pydantic shapes of every role's reply (wire models) and of what roles return to callers.

Wire models mirror the JSON the prompts ask for (triples as ``[s, p, o]`` lists); the public
models (``SemanticExtraction``, ``ConsolidationDecision``, ``AgentAction``) carry ``Triple``s.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from worldmm.models import MemoryType, Triple

WireTriple = tuple[str, str, str]

_LITERAL_RE = re.compile(
    r"^(?:[\d\s:.,/%$€£-]+(?:am|pm|h|min|s|kg|g|km|m|cm|l|ml)?|"
    r"(?:day\s*\d+|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b.*|"
    r"\d+\s+\w+.*(?:street|st|road|rd|avenue|ave|lane|way)\.?)$",
    re.IGNORECASE,
)


def looks_literal(value: str) -> bool:
    """Times, dates, quantities and street addresses are leaf values, never entities."""
    return bool(_LITERAL_RE.match(value.strip()))


def to_triple(wire: WireTriple) -> Triple:
    s, p, o = wire
    return Triple(subject=s, predicate=p, object=o, object_is_literal=looks_literal(o))


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _no_blank_parts(triples: list[WireTriple]) -> list[WireTriple]:
    for t in triples:
        if any(not part.strip() for part in t):
            raise ValueError(f"triple with an empty part: {list(t)}")
    return triples


class Scored(str):
    """A text a model wrote (a caption, a merged summary), carrying the importance the model
    gave the moment (0 routine .. 1 critical) when it gave one; ``None`` otherwise, and then
    construction estimates it (:mod:`worldmm.memory.importance`). A plain ``str`` from a
    provider that rates nothing reads the same as ``Scored(text)``."""

    importance: float | None

    def __new__(cls, text: str, importance: float | None = None) -> Scored:
        obj = super().__new__(cls, text)
        obj.importance = importance
        return obj


def importance_of(text: str) -> float | None:
    """The importance a model gave with ``text`` (None for a plain string)."""
    return getattr(text, "importance", None)


def _lenient_importance(value: object) -> float | None:
    """A rating is a hint, never a reason to fail a window: a number outside [0, 1] is clamped,
    anything else (a word, a missing field) is no rating."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return min(1.0, max(0.0, float(value))) if value == value else None  # NaN: none


class _Rated(_Wire):
    """A reply that may carry the importance the model gave the moment (see :class:`Scored`)."""

    importance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="How much this moment matters to the wearer later: 0 routine, 1 critical.",
    )

    _importance = field_validator("importance", mode="before")(_lenient_importance)


# --- wire models, one per role ---------------------------------------------------------
class CaptionReply(_Rated):
    caption: str = Field(min_length=1)


class NerReply(_Wire):
    named_entities: list[str]


class TriplesReply(_Wire):
    triples: list[WireTriple]

    _check = field_validator("triples")(_no_blank_parts)


class MergeReply(_Rated):
    summary: str = Field(min_length=1)


class SemanticReply(_Wire):
    semantic_triples: list[WireTriple]
    episodic_evidence: list[list[int]]

    _check = field_validator("semantic_triples")(_no_blank_parts)

    @model_validator(mode="after")
    def _aligned(self) -> SemanticReply:
        if len(self.episodic_evidence) != len(self.semantic_triples):
            raise ValueError(
                f"episodic_evidence has {len(self.episodic_evidence)} entries, "
                f"semantic_triples has {len(self.semantic_triples)}; they must align"
            )
        return self


class ConsolidationReply(_Wire):
    updated_triple: WireTriple
    triples_to_remove: list[int]


class RerankReply(_Wire):
    ranked_ids: list[str]


class EntityConfirmReply(_Wire):
    same_entity: bool


class ResponseReply(_Wire):
    answer: str = Field(min_length=1)
    choice: str | None = Field(
        default=None, description="The letter of the chosen option when choices were given."
    )
    evidence: list[str] = Field(
        default_factory=list, description="Ids of the passages relied on, e.g. ['S12', 'F3']."
    )


class AgentAction(_Wire):
    """One decision of the retrieval agent: search one memory, or answer."""

    action: Literal["SEARCH", "ANSWER"]
    memory_type: MemoryType | None = None
    query: str | None = None

    @field_validator("action", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper().strip() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _search_needs_target(self) -> AgentAction:
        if self.action == "SEARCH" and (not self.memory_type or not (self.query or "").strip()):
            raise ValueError("a SEARCH action needs memory_type and a non-empty query")
        if self.action == "ANSWER":
            self.memory_type = None
            self.query = None
        return self


# --- public results ----------------------------------------------------------------------
class SemanticExtraction(BaseModel):
    """Semantic triples and, aligned by position, indices of the episodic triples behind each."""

    semantic_triples: list[Triple]
    episodic_evidence: list[list[int]]


class ConsolidationDecision(BaseModel):
    """The (possibly revised) new triple and indices of candidates it replaces."""

    updated_triple: Triple
    triples_to_remove: list[int]


class Passage(BaseModel):
    """One piece of retrieved memory as the response role reads it. ``ref`` is the id a
    model cites ("S12": segment 12, "F3": semantic fact 3, "V1": a frame)."""

    ref: str
    kind: Literal["segment", "fact", "frame"]
    start: AwareDatetime | None = None
    end: AwareDatetime | None = None
    said: str = ""  # the transcript: what was said
    text: str = ""  # the caption, summary, fact or frame description
    context: str = ""  # the coarser summary a drill-down came from
    segment_id: int | None = None
    # how much the retrieval says it bears on the question: 1 when found for the question
    # itself, less when only a multiple-choice option's own search found it
    weight: float = Field(default=1.0, gt=0.0, le=1.0)


class OptionNote(BaseModel):
    """What the wearer's memory says about one multiple-choice option before any passage is
    read: how common each of its words is (``word_shares``: the share of the memory's
    segments holding it, by lower-case word; words the memory never indexes are left out),
    and, when the option names a time ("about four hours ago"), that time as hours before
    the question (``hours_before``: nearest, farthest)."""

    word_shares: dict[str, float] = Field(default_factory=dict)
    hours_before: tuple[float, float] | None = None


class Response(BaseModel):
    """The response role's answer: readable text first; with choices, the chosen index
    (0-based); ``evidence``: refs of the passages it rests on; ``guess``: nothing supported it."""

    answer: str
    choice_index: int | None = None
    evidence: list[str] = Field(default_factory=list)
    guess: bool = False


_LETTER = re.compile(r"^\s*\(?([A-Za-z])(?:[).:\s]|$)")


def letter_index(value: str | None, n_choices: int) -> int | None:
    """0-based index of a reply's letter ("B", "b.", "(C) ..."), None when none is in range."""
    m = _LETTER.match(value or "")
    if not m:
        return None
    index = ord(m.group(1).upper()) - ord("A")
    return index if 0 <= index < n_choices else None


class AgentRound(BaseModel):
    """One finished retrieval round as the agent sees it next time."""

    memory_type: MemoryType
    query: str
    results_text: str


ROLE_REPLIES: dict[str, type[BaseModel]] = {
    "caption": CaptionReply,
    "ner": NerReply,
    "episodic_triples": TriplesReply,
    "merge_captions": MergeReply,
    "semantic_triples": SemanticReply,
    "consolidation": ConsolidationReply,
    "cross_scale_rerank": RerankReply,
    "reasoning_agent": AgentAction,
    "response": ResponseReply,
    "entity_confirm": EntityConfirmReply,
}
