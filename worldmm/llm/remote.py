"""Model roles over an LLM API: render the role's prompt, dispatch, parse, repair once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel

from worldmm import metrics
from worldmm.llm import schemas as s
from worldmm.llm.dispatch import DirectDispatcher, Dispatcher
from worldmm.llm.parsing import parse_reply
from worldmm.llm.prompts import ROLES, load_prompt
from worldmm.llm.rendering import asked_label, render_choices, render_passages
from worldmm.llm.request import ChatRequest, build_request
from worldmm.llm.role_calls import RoleCall, role_calls
from worldmm.llm.usage_ledger import current_user
from worldmm.models import Triple, choice_letter
from worldmm.providers.errors import ParseError
from worldmm.retry import model_policy

if TYPE_CHECKING:
    from worldmm.llm.usage_ledger import UsageSink
    from worldmm.localtime import Asked
    from worldmm.settings import Settings

M = TypeVar("M", bound=BaseModel)

_LEVEL_LABELS = {180: "3 minutes", 600: "10 minutes", 3600: "1 hour"}


def merge_parameters(level_seconds: int) -> dict[str, object]:
    """Prompt parameters of a merge level: a label and a word budget growing with the span."""
    if level_seconds % 3600 == 0:
        label = f"{level_seconds // 3600} hour" + ("s" if level_seconds > 3600 else "")
    else:
        label = _LEVEL_LABELS.get(level_seconds, f"{level_seconds // 60} minutes")
    max_words = 150 if level_seconds <= 180 else 250 if level_seconds <= 600 else 450
    return {"level_label": label, "max_words": max_words}


def _numbered(lines: Sequence[str]) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines)) or "(none)"


@dataclass(kw_only=True, eq=False)
class RemoteRoles:
    """Construction roles go through ``construction`` (direct or batch), or ``batch`` when
    their :class:`RoleCall` says so; query-time roles (rerank, agent, response) always go
    direct; repairs go direct too. ``calls``: each role's effort and tier."""

    construction: Dispatcher
    direct: DirectDispatcher
    batch: Dispatcher | None = None
    construction_model: str
    agent_model: str
    label: str
    max_rounds: int = 5
    max_completion_tokens: int | None = None
    calls: dict[str, RoleCall] = field(default_factory=dict)
    versions: dict[str, str] = field(
        init=False, default_factory=lambda: {role: load_prompt(role).version for role in ROLES}
    )

    async def _ask(
        self,
        role: str,
        reply_model: type[M],
        *,
        agent: bool = False,
        images: Sequence[bytes] = (),
        **variables: object,
    ) -> M:
        prompt = load_prompt(role).render(**variables)
        call = self.calls.get(role, RoleCall())
        request = build_request(
            role,
            self.agent_model if agent else self.construction_model,
            prompt,
            images,
            max_completion_tokens=self.max_completion_tokens,
            reasoning_effort=call.effort,
            service_tier=call.service_tier,
            user_id=current_user(),
        )
        dispatcher: Dispatcher = self.construction
        if agent or role == "cross_scale_rerank":
            dispatcher = self.direct
        elif call.batch and self.batch is not None:
            dispatcher = self.batch
        result = await dispatcher.complete(request)
        try:
            return parse_reply(reply_model, result.text, role=role)
        except ParseError as first:
            return await self._repair(request, first, reply_model)

    async def _repair(self, request: ChatRequest, first: ParseError, reply_model: type[M]) -> M:
        provider = self.direct.provider
        metrics.LLM_RETRIES.labels(role=request.role, provider=provider, reason="repair").inc()
        result = await self.direct.complete(request.with_repair(first.raw, str(first)))
        try:
            return parse_reply(reply_model, result.text, role=request.role)
        except ParseError as second:
            metrics.LLM_REQUESTS.labels(
                role=request.role, provider=provider, dispatch="direct", outcome="parse_error"
            ).inc()
            raise ParseError(
                f"{request.role}: unusable reply after one repair: {second}",
                role=request.role,
                raw=second.raw,
            ) from second

    # --- roles ----------------------------------------------------------------------------------
    async def caption(
        self, frames: Sequence[bytes], transcript: str, seen_text: Sequence[str] | None = None
    ) -> s.Scored:
        reply = await self._ask(
            "caption",
            s.CaptionReply,
            images=frames,
            frame_count=len(frames),
            transcript=transcript.strip() or "(nothing was said)",
            seen_text="\n".join(seen_text or ()) or "(no text was read)",
        )
        return s.Scored(reply.caption.strip(), reply.importance)

    async def ner(self, text: str) -> list[str]:
        reply = await self._ask("ner", s.NerReply, text=text)
        return list(dict.fromkeys(e.strip() for e in reply.named_entities if e.strip()))

    async def episodic_triples(self, text: str, entities: list[str]) -> list[Triple]:
        reply = await self._ask(
            "episodic_triples", s.TriplesReply, text=text, entities=json.dumps(entities)
        )
        return [s.to_triple(t) for t in reply.triples]

    async def merge_captions(self, captions: list[str], level_seconds: int) -> s.Scored:
        reply = await self._ask(
            "merge_captions",
            s.MergeReply,
            captions=_numbered(captions),
            count=len(captions),
            **merge_parameters(level_seconds),
        )
        return s.Scored(reply.summary.strip(), reply.importance)

    async def semantic_triples(self, summary: str, episodic: list[Triple]) -> s.SemanticExtraction:
        reply = await self._ask(
            "semantic_triples",
            s.SemanticReply,
            summary=summary,
            episodic=_numbered([json.dumps(t.as_list()) for t in episodic]),
        )
        evidence = [
            sorted({i for i in ids if 0 <= i < len(episodic)}) for ids in reply.episodic_evidence
        ]
        return s.SemanticExtraction(
            semantic_triples=[s.to_triple(t) for t in reply.semantic_triples],
            episodic_evidence=evidence,
        )

    async def consolidate(self, new: Triple, candidates: list[Triple]) -> s.ConsolidationDecision:
        if not candidates:
            return s.ConsolidationDecision(updated_triple=new, triples_to_remove=[])
        reply = await self._ask(
            "consolidation",
            s.ConsolidationReply,
            new_triple=json.dumps(new.as_list()),
            candidates=_numbered([json.dumps(t.as_list()) for t in candidates]),
        )
        remove = sorted({i for i in reply.triples_to_remove if 0 <= i < len(candidates)})
        return s.ConsolidationDecision(
            updated_triple=s.to_triple(reply.updated_triple), triples_to_remove=remove
        )

    async def entity_confirm(self, surface: str, candidate: str, context: str) -> bool:
        reply = await self._ask(
            "entity_confirm",
            s.EntityConfirmReply,
            surface=surface,
            candidate=candidate,
            context=context,
        )
        return reply.same_entity

    async def rerank(self, query: str, candidates: list[tuple[str, str]], keep: int) -> list[str]:
        if not candidates:
            return []
        reply = await self._ask(
            "cross_scale_rerank",
            s.RerankReply,
            query=query,
            keep=keep,
            candidates="\n".join(f"[{cid}] {text}" for cid, text in candidates),
        )
        known = {cid for cid, _ in candidates}
        # Unknown ids (hallucinated) are dropped; the model's order is kept.
        return [cid for cid in dict.fromkeys(reply.ranked_ids) if cid in known][:keep]

    async def agent_step(
        self, question: str, rounds: list[s.AgentRound], *, asked: Asked | None = None
    ) -> s.AgentAction:
        if len(rounds) >= self.max_rounds:
            return s.AgentAction(action="ANSWER")
        history = (
            "\n\n".join(
                f"Step {i + 1}: searched {r.memory_type} for {r.query!r}\nResults:\n"
                f"{r.results_text.strip() or '(no results)'}"
                for i, r in enumerate(rounds)
            )
            or "(none yet)"
        )
        return await self._ask(
            "reasoning_agent",
            s.AgentAction,
            agent=True,
            question=question,
            asked=asked_label(asked),
            rounds=history,
            max_rounds=self.max_rounds,
        )

    async def respond(
        self,
        question: str,
        passages: list[s.Passage],
        choices: list[str] | None,
        *,
        asked: Asked | None = None,
        notes: list[s.OptionNote] | None = None,
    ) -> s.Response:
        """With choices, the letter comes back in the JSON (or leads the answer text); a
        reply naming no valid letter is a ParseError, like any unusable reply. Passage
        times are on the wearer's clock, as is the question's time the prompt gives; an
        option that names a time is shown with the hours before the question it means (the
        notes' word shares are the offline answerer's statistics, not shown)."""
        reply = await self._ask(
            "response",
            s.ResponseReply,
            agent=True,
            question=question,
            asked=asked_label(asked),
            context=render_passages(passages, asked.tz if asked else UTC),
            choices=render_choices(choices, notes) if choices else "",
        )
        known = {p.ref for p in passages}
        # Unknown ids (hallucinated) are dropped, as in rerank.
        cited = [
            ref for ref in dict.fromkeys(r.strip("[] ") for r in reply.evidence) if ref in known
        ]
        index = None
        if choices:
            index = s.letter_index(reply.choice, len(choices))
            if index is None:
                index = s.letter_index(reply.answer, len(choices))
            if index is None:
                raise ParseError(
                    f"response: no choice letter A-{choice_letter(len(choices) - 1)} in the "
                    f"reply (choice={reply.choice!r})",
                    role="response",
                    raw=reply.model_dump_json(),
                )
        return s.Response(
            answer=reply.answer.strip(), choice_index=index, evidence=cited, guess=not cited
        )


def build_remote_roles(settings: Settings, usage: UsageSink | None = None) -> RemoteRoles:
    """Roles over the configured provider; every call's usage goes to ``usage``."""
    from worldmm.llm.batch import BatchDispatcher
    from worldmm.providers.clients import async_openai_client, provider_label

    async_openai_client(settings)  # fail now, not at the first call, on a bad provider config
    provider = provider_label(settings)
    direct = DirectDispatcher(
        lambda: async_openai_client(settings),
        provider=provider,
        concurrency=settings.in_flight_start,
        concurrency_max=settings.in_flight_max,
        timeout_s=settings.llm_timeout_s,
        retry=model_policy(settings),
        usage=usage,
    )
    calls = role_calls(settings)
    batch: Dispatcher | None = None
    if settings.llm_dispatch == "batch" or any(c.batch for c in calls.values()):
        batch = BatchDispatcher(
            direct,
            poll_s=settings.llm_batch_poll_s,
            flush_s=settings.llm_batch_flush_s,
            max_lines=settings.llm_batch_max_lines,
        )
    construction: Dispatcher = batch if settings.llm_dispatch == "batch" and batch else direct
    models = settings.llm_construction_model
    if settings.llm_agent_model != models:
        models = f"{models}+{settings.llm_agent_model}"
    return RemoteRoles(
        construction=construction,
        direct=direct,
        batch=batch,
        construction_model=settings.llm_construction_model,
        agent_model=settings.llm_agent_model,
        label=f"{provider}:{models}",
        max_rounds=settings.agent_max_rounds,
        max_completion_tokens=settings.llm_max_completion_tokens,
        calls=calls,
    )
