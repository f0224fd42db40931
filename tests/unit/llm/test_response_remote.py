"""The LLM response role against the scripted OpenAI server: the lettered choices and the
passages go in the prompt, the letter and the cited passages come back in the JSON."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from fakes.openai_server import Reply
from tests.fixtures.fake_openai import make_roles
from worldmm.agent.choices import answer_choices
from worldmm.agent.hit_passages import hit_passages
from worldmm.llm import ParseError
from worldmm.memory.retrieval.results import LaneScore, SegmentHit

T0 = datetime(2025, 5, 1, 10, 0, tzinfo=UTC)


def hits() -> list[SegmentHit]:
    return [
        SegmentHit(
            segment_id=41,
            scale=30,
            start=T0,
            end=T0 + timedelta(seconds=30),
            text="I was somewhere dim; brown dominated what I saw.",
            transcript="Omar: shall we have green tea?",
            score=0.03,
            lanes={"lexical": LaneScore(rank=1, score=0.4)},
            context="Morning in the kitchen with Omar.",
            context_segment_id=7,
        ),
        SegmentHit(
            segment_id=42,
            scale=30,
            start=T0 + timedelta(seconds=30),
            end=T0 + timedelta(seconds=60),
            text="The coffee machine was broken.",
            score=0.02,
        ),
    ]


def test_choices_and_passages_go_in_the_prompt_and_the_letter_comes_back(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(
        Reply.chat(
            json.dumps(
                {
                    "answer": "B. green tea — Omar offered it at 10:00:00 on 1 May 2025.",
                    "choice": "b",
                    "evidence": ["[S41]", "S999"],  # S999 was never shown: dropped
                }
            )
        )
    )
    chosen = asyncio.run(
        answer_choices(
            roles, "What did I drink with Omar?", ["coffee", "B. green tea", "water"], hits()
        )
    )
    assert (chosen.letter, chosen.index, chosen.text) == ("B", 1, "green tea")
    assert chosen.evidence_segment_ids == [41] and not chosen.guess
    assert chosen.answer.startswith("B. green tea — Omar")
    (body,) = fake_openai.chat_requests()
    assert body["model"] == "big-model"
    system, user = (m["content"] for m in body["messages"])
    assert '"choice"' in system and '"evidence"' in system  # the reply schema
    assert "Choices:\nA. coffee\nB. green tea\nC. water" in user
    assert "[S41] segment, 10:00:00–10:00:30 on 1 May 2025 UTC" in user
    # what was said comes before what was seen; the drill-down context follows
    said = user.index("said: Omar: shall we have green tea?")
    assert said < user.index("seen: I was somewhere dim") < user.index("within: Morning")
    assert "[S42]" in user and "Search 1" not in user


def test_a_letter_leading_the_answer_is_taken_when_choice_is_missing(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(Reply.chat('{"answer": "C. water — a guess.", "evidence": []}'))
    chosen = asyncio.run(answer_choices(roles, "What?", ["coffee", "tea", "water"], hits()))
    assert (chosen.letter, chosen.text, chosen.guess) == ("C", "water", True)


def test_a_reply_without_a_valid_letter_is_a_parse_error(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(Reply.chat('{"answer": "Probably tea.", "choice": "E"}'))
    with pytest.raises(ParseError, match="no choice letter A-B"):
        asyncio.run(answer_choices(roles, "What?", ["coffee", "tea"], hits()))


def test_free_form_prompt_has_no_choices_and_returns_the_text(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(
        Reply.chat('{"answer": "Green tea — Omar offered it at 10:00.", "evidence": ["S41"]}')
    )
    reply = asyncio.run(roles.respond("What did I drink?", hit_passages(hits()), None))
    assert reply.answer.startswith("Green tea") and reply.choice_index is None
    assert reply.evidence == ["S41"]
    (body,) = fake_openai.chat_requests()
    assert "Choices:" not in body["messages"][1]["content"]


def test_the_prompts_carry_the_question_time_and_the_wearers_zone(fake_openai):
    """Both roles are told when and where the question is asked; passages are on that clock."""
    from zoneinfo import ZoneInfo

    from worldmm.llm.prompts import load_prompt
    from worldmm.localtime import Asked

    assert load_prompt("response").version.startswith("response/v4-")
    assert load_prompt("reasoning_agent").version.startswith("reasoning_agent/v3-")
    roles = make_roles(fake_openai)
    asked = Asked(T0 + timedelta(days=1), ZoneInfo("Asia/Tokyo"))  # 19:00 on 2 May in Tokyo
    fake_openai.chat.push(Reply.chat('{"action": "ANSWER"}'))
    fake_openai.chat.push(Reply.chat('{"answer": "Green tea.", "evidence": ["S41"]}'))
    asyncio.run(roles.agent_step("What did I drink yesterday?", [], asked=asked))
    asyncio.run(
        roles.respond("What did I drink yesterday?", hit_passages(hits()), None, asked=asked)
    )
    agent, response = fake_openai.chat_requests()
    label = "Asked: 19:00 on Friday 2 May 2025 (Asia/Tokyo, UTC+09:00)"
    assert label in agent["messages"][-1]["content"]
    user = response["messages"][-1]["content"]
    assert label in user
    assert "19:00:00–19:00:30 on 1 May 2025 JST" in user  # 10:00 UTC on the wearer's clock
