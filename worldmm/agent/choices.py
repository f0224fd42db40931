"""Multiple-choice answers from retrieved evidence, with no agent loop around them.

The choices say where to look: :func:`look_per_option` searches once per option (the
question with that option), so every option brings the evidence that would support it, and
:func:`answer_choices` then picks the option the evidence supports best, among all of it:
every option is weighed against the same pooled evidence, by the units that answer the
question, against how common the option is in the memory anyway.
The agent does both when a question comes with choices; a benchmark calls them on one
method's searches. The response role does the choosing: the offline provider scores each
choice against the evidence text, an LLM gets the lettered choices in its prompt and returns
the letter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence

from pydantic import BaseModel, Field

from worldmm.agent.hit_passages import hit_passages
from worldmm.llm.roles import ModelRoles
from worldmm.llm.schemas import OptionNote
from worldmm.localtime import Asked
from worldmm.memory.retrieval.results import SegmentHit, TripleHit
from worldmm.models import MAX_CHOICES, Letter, choice_letter, choice_texts
from worldmm.providers.errors import ParseError

# A window only an option's own search found bears less on the question than one found for
# the question itself (chosen by cross-validation, docs/benchmarks/egolife.md).
OPTION_LOOK_WEIGHT = 0.5


class ChoiceAnswer(BaseModel):
    letter: Letter
    index: int = Field(ge=0, lt=MAX_CHOICES, description="0-based position of the choice.")
    text: str = Field(description="The chosen option, without its letter.")
    answer: str = Field(description="The readable answer: letter, choice, then the evidence.")
    evidence_segment_ids: list[int] = Field(description="Segments the choice rests on.")
    guess: bool = Field(description="True when no evidence supported any choice.")


async def answer_choices(
    roles: ModelRoles,
    question: str,
    choices: list[str],
    hits: list[SegmentHit],
    *,
    looked: Sequence[SegmentHit] = (),
    facts: Sequence[TripleHit] = (),
    asked: Asked | None = None,
    notes: list[OptionNote] | None = None,
    look_weight: float = OPTION_LOOK_WEIGHT,
) -> ChoiceAnswer:
    """Pick one of ``choices`` from ``hits`` (found for the question), ``looked`` (found by
    the options' own searches, :func:`look_per_option`, weighing ``look_weight``) and
    semantic ``facts``, if any, with the response role (told when the question is asked, if
    known, and what the memory says about each option, :mod:`worldmm.agent.option_notes`).
    Raises ValueError on bad choices, ModelCallError when the model fails."""
    texts = choice_texts(choices)
    passages = hit_passages(hits, facts, looked, look_weight)
    reply = await roles.respond(question, passages, texts, asked=asked, notes=notes)
    index = reply.choice_index
    if index is None or not 0 <= index < len(texts):
        raise ParseError(
            f"response: no choice among {len(texts)} options (got {index!r})", role="response"
        )
    segment_ids = {p.ref: p.segment_id for p in passages if p.segment_id is not None}
    return ChoiceAnswer(
        letter=choice_letter(index),
        index=index,
        text=texts[index],
        answer=reply.answer,
        evidence_segment_ids=[segment_ids[r] for r in reply.evidence if r in segment_ids],
        guess=reply.guess,
    )


def with_choices(question: str, choices: Sequence[str]) -> str:
    """The question followed by its lettered options, "(A) ... (B) ...": what the agent
    searches with when a question comes with choices (their words say what to look for; on
    EgoLife's week searching the question alone found the target in the top 3 for 0.18 of
    the questions, with its options 0.26)."""
    options = " ".join(f"({choice_letter(i)}) {t}" for i, t in enumerate(choices) if t.strip())
    return f"{question.strip()} {options}".strip()


def option_query(question: str, choice: str) -> str:
    """What to search for one option: the question with that option."""
    return f"{question.strip()} {choice.strip()}"


async def look_per_option(
    search: Callable[[str], Awaitable[list[SegmentHit]]], question: str, choices: list[str]
) -> list[list[SegmentHit]]:
    """One search per option (concurrently), in choice order: each option's evidence."""
    texts = choice_texts(choices)
    return list(await asyncio.gather(*(search(option_query(question, c)) for c in texts)))


def merge_hits(groups: Iterable[Sequence[SegmentHit]]) -> list[SegmentHit]:
    """The hits of several searches, each segment once (its first appearance kept)."""
    seen: set[int] = set()
    out = []
    for group in groups:
        for hit in group:
            if hit.segment_id not in seen:
                seen.add(hit.segment_id)
                out.append(hit)
    return out
