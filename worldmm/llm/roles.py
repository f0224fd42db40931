"""The model roles every part calls. Nothing outside ``worldmm.llm`` talks to a model API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from worldmm.llm.schemas import (
    AgentAction,
    AgentRound,
    ConsolidationDecision,
    OptionNote,
    Passage,
    Response,
    SemanticExtraction,
)
from worldmm.models import Triple

if TYPE_CHECKING:
    from worldmm.embed.base import TextEmbedder
    from worldmm.llm.usage_ledger import UsageSink
    from worldmm.localtime import Asked
    from worldmm.settings import Settings


@runtime_checkable
class ModelRoles(Protocol):
    """``label`` names the provider ("offline", "openai:gpt-5-mini"); ``versions`` maps each
    role to the prompt (or rule set) version to store with its outputs."""

    label: str
    versions: dict[str, str]

    async def caption(
        self, frames: Sequence[bytes], transcript: str, seen_text: Sequence[str] | None = None
    ) -> str:
        """The window's caption; a :class:`~worldmm.llm.schemas.Scored` when the provider
        also rates the moment's importance (so does :meth:`merge_captions`). ``seen_text``:
        the text OCR read in the window's frames at full size (None: not read, so a local
        captioner reads ``frames`` itself)."""
        ...

    async def ner(self, text: str) -> list[str]: ...

    async def episodic_triples(self, text: str, entities: list[str]) -> list[Triple]: ...

    async def merge_captions(self, captions: list[str], level_seconds: int) -> str: ...

    async def semantic_triples(
        self, summary: str, episodic: list[Triple]
    ) -> SemanticExtraction: ...

    async def consolidate(self, new: Triple, candidates: list[Triple]) -> ConsolidationDecision: ...

    async def entity_confirm(self, surface: str, candidate: str, context: str) -> bool: ...

    async def rerank(
        self, query: str, candidates: list[tuple[str, str]], keep: int
    ) -> list[str]: ...

    async def agent_step(
        self, question: str, rounds: list[AgentRound], *, asked: Asked | None = None
    ) -> AgentAction:
        """The next step; ``asked``: when and in which zone the question is asked (its time
        words mean that moment on that clock), None when unknown."""
        ...

    async def respond(
        self,
        question: str,
        passages: list[Passage],
        choices: list[str] | None,
        *,
        asked: Asked | None = None,
        notes: list[OptionNote] | None = None,
    ) -> Response:
        """The answer, short answer first; ``choices`` are plain option texts, lettered A, B, ...
        by position, and the reply's ``choice_index`` is set exactly when they are given.
        Times in the answer are said on the wearer's clock of ``asked`` (UTC when None).
        ``notes``: one per choice, what the wearer's memory says about it (how common its
        words are; the time it names), for the answerer to weigh the evidence against."""
        ...


def build_roles(
    settings: Settings, embedder: TextEmbedder, usage: UsageSink | None = None
) -> ModelRoles:
    """Offline rules when ``llm_provider == "offline"`` (no usage: nothing is billed),
    otherwise prompts over the LLM client, its calls' usage recorded in ``usage``."""
    if settings.llm_provider == "offline":
        from worldmm.llm.rule_based import RuleBasedRoles

        return RuleBasedRoles(
            embedder, max_rounds=settings.agent_max_rounds, ocr_frames=settings.ocr_frames
        )
    from worldmm.llm.remote import build_remote_roles

    return build_remote_roles(settings, usage)
