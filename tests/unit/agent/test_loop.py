"""The adaptive loop with a scripted ModelRoles and recording retrievers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import cast
from zoneinfo import ZoneInfo

import pytest

from tests.fixtures.fake_models import (
    ScriptedRoles,
    call_error,
    parse_error,
    search,
)
from tests.fixtures.hits import window_hit
from worldmm.agent import AgentResult, answer_question, run_agent
from worldmm.deps import Deps
from worldmm.llm.schemas import AgentAction
from worldmm.memory.retrieval import (
    FrameHit,
    RetrievalResult,
    SegmentHit,
    TripleHit,
)
from worldmm.settings import Settings

T0 = datetime(2025, 5, 1, 10, 0, tzinfo=UTC)
ANSWER = AgentAction(action="ANSWER")


TOKYO = ZoneInfo("Asia/Tokyo")
NOW = datetime(2025, 5, 2, 9, 0, tzinfo=UTC)


def agent_deps(roles: ScriptedRoles, settings: Settings) -> Deps:
    """answer_question reads the roles, the settings, the clock and the user's zone; these
    tests' searches are fakes that never reach the rest of the bundle (the database, the
    models, the cache)."""
    reader = SimpleNamespace(zone=lambda user_id: TOKYO)
    return cast(
        Deps, SimpleNamespace(roles=roles, settings=settings, clock=lambda: NOW, reader=reader)
    )


def seg_hit(i: int) -> SegmentHit:
    return window_hit(i, T0, f"Passage {i} text.")


class Recorder:
    """One fake retriever per memory, each returning fixed hits and recording queries."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def for_memory(self, memory: str):
        async def retrieve(query: str) -> RetrievalResult:
            self.calls.append((memory, query))
            if memory == "episodic":
                hits = [seg_hit(1), seg_hit(2)]
            elif memory == "semantic":
                hits = [
                    TripleHit(
                        triple_id=7, subject="I", predicate="likes", object="coffee", score=1.0
                    )
                ]
            else:
                hits = [FrameHit(key="f/1.jpg", ts=T0, segment_id=1, score=0.3)]
            return RetrievalResult(memory_type=memory, query=query, hits=hits)

        return retrieve

    def all(self):
        return {m: self.for_memory(m) for m in ("episodic", "semantic", "visual")}


def run(coro):
    return asyncio.run(coro)


def run_scripted(
    roles: ScriptedRoles, question: str = "q", **kwargs
) -> tuple[Recorder, AgentResult]:
    """The agent run with ``roles`` over fresh recording retrievers."""
    rec = Recorder()
    return rec, run(run_agent(roles, rec.all(), question, **kwargs))


def test_search_dispatches_to_the_chosen_memory_with_the_chosen_query():
    roles = ScriptedRoles(
        [
            search("semantic", "coffee habit"),
            search("visual", "red cup"),
            search("episodic", "kitchen"),
            ANSWER,
        ]
    )
    rec, result = run_scripted(roles, "What do I drink?", max_rounds=5)
    assert rec.calls == [
        ("semantic", "coffee habit"),
        ("visual", "red cup"),
        ("episodic", "kitchen"),
    ]
    assert [(r.memory_type, r.query) for r in result.rounds] == rec.calls
    assert result.stopped == "answer"
    assert len(roles.steps_seen) == 4  # three searches and the ANSWER step


def test_each_step_sees_the_results_of_earlier_rounds():
    roles = ScriptedRoles([search("semantic", "coffee"), search("episodic", "morning"), ANSWER])
    run_scripted(roles)
    assert roles.steps_seen[0] == []
    first = roles.steps_seen[1][0]
    assert (first.memory_type, first.query) == ("semantic", "coffee")
    assert "I likes coffee" in first.results_text
    assert [r.memory_type for r in roles.steps_seen[2]] == ["semantic", "episodic"]


def test_answer_first_means_no_search_and_the_responder_still_answers():
    roles = ScriptedRoles([ANSWER])
    rec, result = run_scripted(roles, "hello?")
    assert rec.calls == [] and result.rounds == []
    assert result.stopped == "answer"
    ((question, passages, choices),) = roles.respond_calls
    assert (question, passages, choices) == ("hello?", [], None)
    assert result.answer.startswith("answer to 'hello?'")
    assert result.choice is None and result.label == "scripted"


def test_choices_say_where_to_look_even_when_the_agent_answers_at_once():
    roles = ScriptedRoles([ANSWER])
    rec, result = run_scripted(roles, "hello?", choices=["A. yes", "B. no"])
    # no search of the agent's own; one episodic look per option, kept as rounds
    assert rec.calls == [("episodic", "hello? yes"), ("episodic", "hello? no")]
    assert [(r.query, r.note) for r in result.rounds] == [
        ("hello? yes", "looked up for option A"),
        ("hello? no", "looked up for option B"),
    ]
    assert result.stopped == "answer"
    ((question, passages, choices),) = roles.respond_calls
    assert (question, choices) == ("hello?", ["yes", "no"])  # letters are positional
    assert [p.ref for p in passages] == ["S1", "S2"]  # each segment once
    assert result.choice is not None and (result.choice.letter, result.choice.text) == ("A", "yes")
    assert [e.segment_id for e in result.evidence] == [1, 2]


def test_with_choices_the_agent_is_asked_the_question_and_its_options():
    roles = ScriptedRoles([search("episodic", "what the agent chose"), ANSWER])
    run_scripted(roles, "What did I drink? ", choices=["A. tea", "coffee"])
    assert roles.questions_seen == ["What did I drink? (A) tea (B) coffee"] * 2
    # the answer is still given for the question as asked
    ((question, _, choices),) = roles.respond_calls
    assert (question, choices) == ("What did I drink? ", ["tea", "coffee"])


def test_max_rounds_forces_the_answer():
    roles = ScriptedRoles([search("episodic", f"query {i}") for i in range(10)])
    rec, result = run_scripted(roles, max_rounds=3)
    assert len(result.rounds) == 3 and len(rec.calls) == 3
    assert len(roles.steps_seen) == 3  # not asked a fourth time
    assert result.stopped == "max_rounds"
    assert len(roles.respond_calls) == 1


def test_unparsable_step_is_retried_once():
    roles = ScriptedRoles([parse_error(), search("semantic", "coffee"), ANSWER])
    rec, result = run_scripted(roles)
    assert rec.calls == [("semantic", "coffee")]
    assert result.stopped == "answer"


def test_second_unparsable_step_ends_the_search_and_answers():
    roles = ScriptedRoles(
        [search("episodic", "a"), parse_error(), parse_error(), search("episodic", "never")]
    )
    rec, result = run_scripted(roles)
    assert rec.calls == [("episodic", "a")]
    assert result.stopped == "parse_error"
    assert [p.text for p in roles.respond_calls[0][1]] == ["Passage 1 text.", "Passage 2 text."]
    assert result.evidence[0].segment_id == 1


def test_failed_step_call_answers_from_what_was_found():
    roles = ScriptedRoles([search("visual", "cup"), call_error()])
    _, result = run_scripted(roles)
    assert result.stopped == "model_error"
    assert result.frames == ["f/1.jpg"]


def test_repeated_search_reuses_results_without_searching_again():
    roles = ScriptedRoles([search("episodic", "Kitchen"), search("episodic", " kitchen "), ANSWER])
    rec, result = run_scripted(roles)
    assert rec.calls == [("episodic", "Kitchen")]
    assert [r.repeated for r in result.rounds] == [False, True]
    assert result.rounds[1].results == result.rounds[0].results


def test_result_collects_distinct_evidence_triples_and_frames_and_survives_json():
    roles = ScriptedRoles(
        [
            search("episodic", "a"),
            search("episodic", "b"),
            search("semantic", "c"),
            search("visual", "d"),
            ANSWER,
        ]
    )
    _, result = run_scripted(roles)
    assert [e.segment_id for e in result.evidence] == [1, 2]
    assert [t.triple_id for t in result.triples] == [7]
    assert result.frames == ["f/1.jpg"]
    back = AgentResult.model_validate_json(result.model_dump_json())
    assert back == result
    assert isinstance(back.rounds[2].results[0], TripleHit)
    assert isinstance(back.rounds[3].results[0], FrameHit)


def test_responder_reads_passages_not_the_search_log():
    roles = ScriptedRoles(
        [search("episodic", "a"), search("semantic", "c"), search("visual", "d"), ANSWER]
    )
    _, result = run_scripted(roles)
    ((_, passages, choices),) = roles.respond_calls
    assert choices is None and result.choice is None
    assert [p.ref for p in passages] == ["S1", "S2", "F7", "V1"]
    assert result.cited_segment_ids == [1]  # the window the answer comes from (S1)
    assert passages[0].start == T0 + timedelta(seconds=30) and passages[0].segment_id == 1
    assert passages[2].text == "I likes coffee."
    assert all("Search" not in p.text and "query" not in p.text for p in passages[:3])


def test_choices_go_through_answer_choices_with_segments_and_facts():
    roles = ScriptedRoles([search("episodic", "a"), search("semantic", "c"), ANSWER], choose=2)
    _, result = run_scripted(roles, choices=["tea", "B. coffee", "juice"])
    ((_, passages, choices),) = roles.respond_calls
    assert choices == ["tea", "coffee", "juice"]
    assert [p.ref for p in passages] == ["S1", "S2", "F7"]  # frames carry no words
    assert result.choice is not None
    assert (result.choice.letter, result.choice.index, result.choice.text) == ("C", 2, "juice")
    assert result.choice.evidence_segment_ids == [1]
    assert result.answer == result.choice.answer


def test_bad_choices_fail_before_any_search():
    rec = Recorder()
    roles = ScriptedRoles([search("episodic", "a"), ANSWER])
    with pytest.raises(ValueError, match="2 to 8 choices"):
        run(run_agent(roles, rec.all(), "q", choices=["only one"]))
    with pytest.raises(ValueError, match="choice B is blank"):
        run(run_agent(roles, rec.all(), "q", choices=["tea", "  "]))
    assert rec.calls == [] and roles.respond_calls == []


def test_answer_question_passes_user_and_as_of_to_every_search():
    seen: list[tuple[str, str, str, datetime | None, ZoneInfo | None]] = []

    def fake(memory):
        async def fn(deps, user_id, query, as_of, *, tz=None):
            seen.append((memory, user_id, query, as_of, tz))
            return RetrievalResult(memory_type=memory, query=query, hits=[])

        return fn

    roles = ScriptedRoles(
        [search("episodic", "x"), search("semantic", "y"), search("visual", "z"), ANSWER]
    )
    deps = agent_deps(roles, Settings(agent_max_rounds=5))
    cutoff = T0 + timedelta(hours=1)
    result = run(
        answer_question(
            deps,
            "u-42",
            "q",
            as_of=cutoff,
            searches={m: fake(m) for m in ("episodic", "semantic", "visual")},
        )
    )
    assert seen == [
        ("episodic", "u-42", "x", cutoff, TOKYO),
        ("semantic", "u-42", "y", cutoff, TOKYO),
        ("visual", "u-42", "z", cutoff, TOKYO),
    ]
    assert result.stopped == "answer"
    assert roles.respond_calls[0][1] == []  # three empty searches: nothing to read


def test_answer_question_uses_settings_max_rounds():
    roles = ScriptedRoles([search("episodic", f"q{i}") for i in range(10)])

    async def fn(deps, user_id, query, as_of, *, tz=None):
        return RetrievalResult(memory_type="episodic", query=query, hits=[])

    deps = agent_deps(roles, Settings(agent_max_rounds=2))
    result = run(answer_question(deps, "u", "q", searches={"episodic": fn}))
    assert len(result.rounds) == 2 and result.stopped == "max_rounds"
