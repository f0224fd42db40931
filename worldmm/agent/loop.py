"""The adaptive retrieval loop (paper §3.2–3.3): up to ``max_rounds`` times the agent role
picks a memory and a query, or answers; the response role then answers from every round's
passages (what was said and seen, when), never from the agent's own search log.

A model failure ends the search, not the question: the answer comes from what was found.
Every round searches as of the question's one moment on the wearer's clock
(:class:`~worldmm.localtime.Asked`), and both roles are told that moment.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from worldmm.agent.choices import answer_choices, look_per_option, option_query, with_choices
from worldmm.agent.hit_passages import round_passages
from worldmm.agent.option_notes import option_notes
from worldmm.agent.result import AgentResult, RoundRecord, StopReason
from worldmm.llm.roles import ModelRoles
from worldmm.llm.schemas import AgentAction, AgentRound, OptionNote
from worldmm.llm.usage_ledger import for_user
from worldmm.localtime import Asked
from worldmm.memory.retrieval import SEARCHES, RetrievalResult, Search
from worldmm.memory.retrieval.question_time import question_time
from worldmm.memory.retrieval.results import SegmentHit, TripleHit
from worldmm.models import MemoryType, choice_letter, choice_texts
from worldmm.providers.errors import ModelCallError, ParseError

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger(__name__)

Retriever = Callable[[str], Awaitable[RetrievalResult]]


async def next_action(
    roles: ModelRoles, question: str, history: list[AgentRound], asked: Asked | None = None
) -> AgentAction | StopReason:
    """The agent's next step; an unparsable reply is asked again once."""
    for attempt in (1, 2):
        try:
            return await roles.agent_step(question, history, asked=asked)
        except ParseError as exc:
            log.warning("agent.step_unparsable attempt=%d error=%s", attempt, exc)
        except ModelCallError as exc:
            log.warning("agent.step_failed error=%s", exc)
            return "model_error"
    return "parse_error"


async def run_agent(
    roles: ModelRoles,
    retrievers: Mapping[MemoryType, Retriever],
    question: str,
    *,
    choices: list[str] | None = None,
    max_rounds: int = 5,
    asked: Asked | None = None,
    notes: list[OptionNote] | None = None,
) -> AgentResult:
    """The loop over ``retrievers`` (one per memory); ``asked``: when and on whose clock
    the question is read, told to both roles (None: not known to them); ``notes``: what the
    memory says about each choice, for the answerer."""
    # with choices the agent sees them: their words say what to look for
    seek = with_choices(question, choice_texts(choices)) if choices else question
    rounds: list[RoundRecord] = []
    history: list[AgentRound] = []
    seen: dict[tuple[str, str], RoundRecord] = {}
    stopped: StopReason = "max_rounds"
    while len(rounds) < max_rounds:
        action = await next_action(roles, seek, history, asked)
        if isinstance(action, str):
            stopped = action
            break
        if action.action == "ANSWER":
            stopped = "answer"
            break
        assert action.memory_type is not None and action.query is not None  # schema-checked
        key = (action.memory_type, " ".join(action.query.split()).casefold())
        if key in seen:
            record = seen[key].model_copy(update={"repeated": True})
        else:
            record = RoundRecord.of(await _retrieve(retrievers, action.memory_type, action.query))
            seen[key] = record
        log.info(
            "agent.round n=%d memory=%s hits=%d repeated=%s",
            len(rounds) + 1,
            record.memory_type,
            len(record.results),
            record.repeated,
        )
        rounds.append(record)
        history.append(
            AgentRound(
                memory_type=record.memory_type,
                query=record.query,
                results_text=record.as_result().as_text(),
            )
        )
    if choices:
        own = list(rounds)
        looks = await option_rounds(retrievers, question, choices)
        rounds += looks
        chosen = await answer_choices(
            roles,
            question,
            choices,
            [h for r in own for h in r.results if isinstance(h, SegmentHit)],
            looked=[h for r in looks for h in r.results if isinstance(h, SegmentHit)],
            facts=[h for r in rounds for h in r.results if isinstance(h, TripleHit)],
            asked=asked,
            notes=notes,
        )
        return AgentResult.assemble(chosen.answer, rounds, roles.label, stopped, chosen)
    reply = await roles.respond(question, round_passages(rounds), None, asked=asked)
    return AgentResult.assemble(reply.answer, rounds, roles.label, stopped, cited=reply.evidence)


# the note on a round the choices asked for (not the agent): callers counting the agent's own
# searches leave these out
OPTION_LOOKUP = "looked up for option"


async def option_rounds(
    retrievers: Mapping[MemoryType, Retriever], question: str, choices: list[str]
) -> list[RoundRecord]:
    """The choices say where to look: one episodic search per option, kept as rounds (so
    their segments are evidence like any other round's)."""
    episodic = retrievers.get("episodic")
    if episodic is None:
        return []
    results: list[RetrievalResult] = []

    async def search(query: str) -> list[SegmentHit]:
        result = await episodic(query)
        results.append(result)
        return [h for h in result.hits if isinstance(h, SegmentHit)]

    await look_per_option(search, question, choices)
    by_query = {r.query: r for r in results}
    records = []
    for letter_i, text in enumerate(choice_texts(choices)):
        result = by_query.get(option_query(question, text))
        if result is not None:
            note = f"{OPTION_LOOKUP} {choice_letter(letter_i)}"
            records.append(RoundRecord.of(result).model_copy(update={"note": note}))
    return records


async def _retrieve(
    retrievers: Mapping[MemoryType, Retriever], memory: MemoryType, query: str
) -> RetrievalResult:
    retriever = retrievers.get(memory)
    if retriever is None:
        return RetrievalResult(
            memory_type=memory, query=query, hits=[], note=f"{memory} memory is not available here"
        )
    return await retriever(query)


async def answer_question(
    deps: Deps,
    user_id: str,
    question: str,
    *,
    choices: list[str] | None = None,
    as_of: datetime | None = None,
    tz: ZoneInfo | None = None,
    searches: Mapping[MemoryType, Search] = SEARCHES,
) -> AgentResult:
    """Run the agent over one user's memory, read at ``as_of`` (a live question: the
    injected clock's now) on ``tz`` (default: the user's zone); every search sees only the
    memory that existed at that moment. The result says the moment and the zone. Its model
    calls are the user's usage."""
    asked = await question_time(deps, user_id, as_of, tz)
    notes = await option_notes(deps, user_id, choice_texts(choices), asked) if choices else None
    retrievers: dict[MemoryType, Retriever] = {
        memory: functools.partial(_bound, fn, deps, user_id, asked)
        for memory, fn in searches.items()
    }
    with for_user(user_id):
        result = await run_agent(
            deps.roles,
            retrievers,
            question,
            choices=choices,
            max_rounds=deps.settings.agent_max_rounds,
            asked=asked,
            notes=notes,
        )
    return result.model_copy(update={"asked_at": asked.at, "timezone": asked.zone_name})


async def _bound(fn: Search, deps: Deps, user_id: str, asked: Asked, query: str) -> RetrievalResult:
    """One round's search at the question's moment, its times on the wearer's clock."""
    result = await fn(deps, user_id, query, asked.at, tz=asked.tz)
    return result.in_zone(asked.tz)
