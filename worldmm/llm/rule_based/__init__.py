"""Every model role by rules, the stand-in behind ``llm_provider=offline``: deterministic,
no network, no key.

Captions come from what can honestly be read off the inputs (OCR text, colours, brightness,
motion, and the transcript); NER and triples from rules; merging, reranking, consolidation and
answers from MiniLM embeddings plus word overlap. Outputs are labelled "offline".
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

import numpy as np

from worldmm.embed.base import TextEmbedder
from worldmm.llm.rule_based import answers, routing, semantic, text
from worldmm.llm.rule_based.evidence import evidence_units
from worldmm.llm.rule_based.memo import MemoEmbedder
from worldmm.llm.rule_based.ranking import mmr_select, near_duplicates, relevance
from worldmm.llm.rule_based.vision import SceneCues, scene_cues
from worldmm.llm.rule_based.weighing import Weighing, weigh
from worldmm.llm.schemas import (
    AgentAction,
    AgentRound,
    ConsolidationDecision,
    OptionNote,
    Passage,
    Response,
    SemanticExtraction,
)
from worldmm.localtime import Asked
from worldmm.models import Triple

OFFLINE_VERSION = "offline-v1"
# Roles whose rules changed since v1: captions lead with the words (what was said, then what
# was read) before the scene cues; answers give the short answer first, then the evidence
# (v2), with times on the wearer's clock, said relative to the question ("yesterday at
# 15:02", v3); what was written is answered from the text read, what was said from the
# transcript, which may hold a question word misheard (v4); a habit question reads how often
# the memory holds an option as evidence for it, and attends the facts found for it (v5).
_REVISED = {"caption": "offline-v2", "response": "offline-v5"}
_SPEAKER = re.compile(r"^\s*([A-Z][\w' -]{0,30}):\s+(.+)$")
_ROLES = (
    "caption",
    "ner",
    "episodic_triples",
    "merge_captions",
    "semantic_triples",
    "consolidation",
    "cross_scale_rerank",
    "reasoning_agent",
    "response",
    "entity_confirm",
)


def describe_scene(cues: SceneCues, transcript: str, *, max_transcript_chars: int = 800) -> str:
    """A first-person caption from the transcript and scene cues: what was said first, then
    the text read in the frames, then the colour and motion cues (a preview of the caption
    should show the words, not the colours)."""
    parts: list[str] = []
    spoken: list[str] = []
    for line in transcript.strip().splitlines():
        line = line.strip()
        if not line:
            continue
        m = _SPEAKER.match(line)
        words = (m.group(2) if m else line).strip().rstrip(".!?,;")
        spoken.append(f'{m.group(1)} said: "{words}"' if m else f'I heard: "{words}"')
    said = " ".join(f"{s}." for s in spoken)
    if len(said) > max_transcript_chars:
        said = said[:max_transcript_chars].rsplit(" ", 1)[0] + ' …"'
    if said:
        parts.append(said)
    if cues.texts:
        shown = ", ".join(f'"{t}"' for t in cues.texts[:8])
        parts.append(f"I saw text reading {shown}.")
    if cues.brightness != "unknown":
        # Worded without determiners so NER does not take "the view" for an entity.
        colours = " and ".join(cues.colours) if cues.colours else "mixed colours"
        view = "kept changing" if cues.motion == "changing" else "stayed steady"
        parts.append(
            f"I was somewhere {cues.brightness}; {colours} dominated what I saw, which {view}."
        )
    if not parts:
        return "I recorded a moment with nothing legible to read and nothing said."
    if not cues.texts and not said and cues.brightness != "unknown":
        parts.append("Nothing legible was visible and nothing was said.")
    return " ".join(parts)


def _merge_budget(level_seconds: int) -> int:
    """Sentences kept by the extractive merge: more for longer periods."""
    if level_seconds <= 180:
        return 6
    if level_seconds <= 600:
        return 8
    return 12


class RuleBasedRoles:
    label = "offline"

    def __init__(self, embedder: TextEmbedder, *, max_rounds: int = 5, ocr_frames: int = 4):
        self._embedder = embedder
        self._answer_embedder = MemoEmbedder(embedder)  # passages recur across questions
        self._max_rounds = max_rounds
        self._ocr_frames = ocr_frames
        self.versions = {role: f"{role}/{_REVISED.get(role, OFFLINE_VERSION)}" for role in _ROLES}

    async def caption(
        self, frames: Sequence[bytes], transcript: str, seen_text: Sequence[str] | None = None
    ) -> str:
        cues = await asyncio.to_thread(
            scene_cues, list(frames), ocr_frames=self._ocr_frames, texts=seen_text
        )
        return describe_scene(cues, transcript)

    async def ner(self, text_: str) -> list[str]:
        return text.extract_entities(text_)

    async def episodic_triples(self, text_: str, entities: list[str]) -> list[Triple]:
        return text.event_triples(text_, entities)

    async def merge_captions(self, captions: list[str], level_seconds: int) -> str:
        units = [s for c in captions for s in text.sentences(c)]
        units = [units[i] for i in near_duplicates(units)]
        if not units:
            return "Nothing was recorded in this period."
        keep = await asyncio.to_thread(
            mmr_select, self._embedder, units, _merge_budget(level_seconds)
        )
        return " ".join(units[i] for i in keep)

    async def semantic_triples(self, summary: str, episodic: list[Triple]) -> SemanticExtraction:
        return semantic.extract_semantic(summary, episodic)

    async def consolidate(self, new: Triple, candidates: list[Triple]) -> ConsolidationDecision:
        return await asyncio.to_thread(semantic.consolidate, self._embedder, new, candidates)

    async def entity_confirm(self, surface: str, candidate: str, context: str) -> bool:
        a = set(text.content_tokens(surface)) or {surface.lower()}
        b = set(text.content_tokens(candidate)) or {candidate.lower()}
        if a == b or (a <= b or b <= a) and min(len(a), len(b)) >= 1:
            return True
        vectors = await asyncio.to_thread(self._embedder.embed, [surface, candidate])
        return float(vectors[0] @ vectors[1]) >= 0.85

    async def rerank(self, query: str, candidates: list[tuple[str, str]], keep: int) -> list[str]:
        if not candidates:
            return []
        scores = await asyncio.to_thread(
            relevance, self._embedder, query, [t for _, t in candidates]
        )
        order = np.argsort(-scores, kind="stable")[: max(keep, 0)]
        return [candidates[i][0] for i in order.tolist()]

    async def agent_step(
        self, question: str, rounds: list[AgentRound], *, asked: Asked | None = None
    ) -> AgentAction:
        # the rules route by the question's words; every search reads its time words itself
        return routing.next_action(question, rounds, self._max_rounds)

    async def respond(
        self,
        question: str,
        passages: list[Passage],
        choices: list[str] | None,
        *,
        asked: Asked | None = None,
        notes: list[OptionNote] | None = None,
    ) -> Response:
        embedder = self._answer_embedder
        if choices:
            return await asyncio.to_thread(
                answers.answer_choice, embedder, question, passages, choices, asked, notes
            )
        return await asyncio.to_thread(answers.answer_free, embedder, question, passages, asked)

    async def weigh_choices(
        self,
        question: str,
        passages: list[Passage],
        choices: list[str],
        *,
        asked: Asked | None = None,
        notes: list[OptionNote] | None = None,
    ) -> Weighing | None:
        """What :meth:`respond` picks from, for any base-rate weight (the benchmark's
        cross-validation of that weight); None when the passages hold no evidence unit."""
        units = evidence_units(passages)
        if not units:
            return None
        return await asyncio.to_thread(
            weigh, self._answer_embedder, question, units, choices, notes, asked
        )
