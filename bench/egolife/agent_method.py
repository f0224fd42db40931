"""The served method (``agent``): each question asked as ``POST /v1/users/{id}/query`` asks it.

The route's own function (:func:`query_api.ops.query.run_query`) runs with the choices, no
``as_of`` and the question's time as the clock's now, so the agent reads the question live:
its memory choices and rounds, its per-option lookups and its answer are the API's. Its
retrieval figures are scored from the segments of the agent's own episodic rounds (the
options' lookups left out), in the order it found them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from bench.egolife.data import Question
from bench.egolife.truth import Ranked
from bench.harness import summary
from worldmm.agent.loop import OPTION_LOOKUP
from worldmm.deps import Deps
from worldmm.llm.schemas import OptionNote, Passage
from worldmm.localtime import Asked
from worldmm.wire.schemas import QueryRequest, QueryResponse

AGENT = "agent"


class Responded(NamedTuple):
    """What the served agent's response role was given for its answer."""

    question: str
    passages: list[Passage]
    choices: list[str]
    asked: Asked | None
    notes: list[OptionNote] | None


class RespondLog:
    """The agent's model roles, recording the last response call (the answer to the
    choices), so the benchmark can weigh the same evidence under the answerer's other weights
    (its cross-validation) without asking the agent again."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.last: Responded | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def respond(self, question, passages, choices, *, asked=None, notes=None):
        if choices:
            self.last = Responded(question, list(passages), list(choices), asked, notes)
        return await self._inner.respond(question, passages, choices, asked=asked, notes=notes)


def with_look_weight(passages: Sequence[Passage], look_weight: float) -> list[Passage]:
    """``passages`` with those only an option's own search found (the ones weighing less
    than 1, :class:`Passage`) weighing ``look_weight``."""
    return [p.model_copy(update={"weight": look_weight}) if p.weight < 1.0 else p for p in passages]


@dataclass
class AgentAnswers:
    """Per question: the letter the served agent chose (None: no answer), the segments of
    its own episodic rounds, and the memories its own rounds searched."""

    letters: list[str | None] = field(default_factory=list)
    ranked: list[list[Ranked]] = field(default_factory=list)
    memories: list[list[str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # per question, the route's whole call
    # what its response role weighed for each answer (None: no answer)
    responded: list[Responded | None] = field(default_factory=list)

    def info(self) -> dict:
        """How the agent searched: rounds per question, the memory of its first round, and
        how often each memory was searched (its own rounds, not the options' lookups)."""
        n = max(1, len(self.memories))
        return {
            "rounds_mean": round(sum(len(m) for m in self.memories) / n, 3),
            "first_memory": dict(Counter(m[0] if m else "none" for m in self.memories)),
            "memories_searched": dict(Counter(x for m in self.memories for x in m)),
            "failures": self.failures[:5],
            # what a served question costs: every round, the options' lookups and the answer
            "question_ms": summary(self.seconds, digits=1, scale=1000),
        }


def own_rounds(reply: QueryResponse) -> list:
    """The agent's own rounds: those its choices did not ask for."""
    return [r for r in reply.rounds if not (r.note or "").startswith(OPTION_LOOKUP)]


def episodic_ranking(reply: QueryResponse) -> list[Ranked]:
    """The segments of the agent's own episodic rounds, each once, in the order found."""
    out: dict[tuple[datetime, datetime], Ranked] = {}
    for r in own_rounds(reply):
        if r.memory_type != "episodic":
            continue
        for hit in r.results:
            if "scale" not in hit:
                continue
            start, end = datetime.fromisoformat(hit["start"]), datetime.fromisoformat(hit["end"])
            out.setdefault((start, end), Ranked(start=start, end=end, scale=hit["scale"]))
    return list(out.values())


async def ask_served(
    deps: Deps, user_id: str, q: Question, choices: Sequence[tuple[str, str]]
) -> QueryResponse:
    """One question through the query route's function, asked live at its time."""
    from query_api.ops.query import run_query

    req = QueryRequest(question=q.question, choices=[t for _, t in choices] or None)
    live = deps.with_clock(lambda: q.query_time)
    return await run_query(live, user_id, req)


async def run_agent_method(
    deps: Deps,
    user_id: str,
    questions: Sequence[Question],
    offered,
    progress,
) -> AgentAnswers:
    """Every question asked of the served agent (``offered(q)``: its (letter, text)
    choices)."""
    from worldmm.providers.errors import ModelCallError

    out = AgentAnswers()
    log = RespondLog(deps.roles)
    deps = replace(deps, roles=log)
    for q in progress.track(questions, description="ask the served agent"):
        choices = offered(q)
        log.last = None
        try:
            started = time.perf_counter()
            reply = await ask_served(deps, user_id, q, choices)
            out.seconds.append(time.perf_counter() - started)
        except (ValueError, ModelCallError) as exc:
            out.letters.append(None)
            out.ranked.append([])
            out.memories.append([])
            out.responded.append(None)
            out.failures.append(f"{q.id}: {exc}")
            continue
        out.responded.append(log.last)
        chosen = reply.choice
        out.letters.append(choices[chosen.index][0] if chosen is not None else None)
        out.ranked.append(episodic_ranking(reply))
        out.memories.append([r.memory_type for r in own_rounds(reply)])
    return out
