"""Reasoning effort and service tier per role: construction at the lowest effort, the agent at
its own, roles that can wait on a cheaper tier when configured, and what each call reports
recorded under the tier that served it."""

from __future__ import annotations

import asyncio

import pytest

from fakes.openai_server import Reply, chat_body
from tests.fixtures.fake_openai import make_roles
from worldmm.llm.role_calls import QUERY_ROLES, RoleCall, role_calls
from worldmm.llm.usage_ledger import UsageRecord
from worldmm.models import Triple
from worldmm.settings import load_settings


class Recorded:
    def __init__(self) -> None:
        self.records: list[UsageRecord] = []

    def record(self, rec: UsageRecord) -> None:
        self.records.append(rec)


def test_defaults_construction_minimal_agent_its_own_nothing_deferred() -> None:
    calls = role_calls(load_settings())
    for role, call in calls.items():
        if role in QUERY_ROLES:
            assert call == RoleCall(effort=None)  # not sent: the model's own
        else:
            assert call == RoleCall(effort="minimal")


def test_exceptions_tiers_and_bad_names() -> None:
    calls = role_calls(
        load_settings(
            llm_role_reasoning_effort="merge_captions:low, response:high",
            llm_agent_reasoning_effort="medium",
            llm_deferred_tier="flex",
        )
    )
    assert calls["merge_captions"] == RoleCall("low", "flex")
    assert calls["consolidation"] == RoleCall("minimal", "flex")
    assert calls["caption"] == RoleCall("minimal") and calls["ner"] == RoleCall("minimal")
    assert calls["response"] == RoleCall("high") and calls["reasoning_agent"] == RoleCall("medium")
    batch = role_calls(load_settings(llm_deferred_tier="batch", llm_deferred_roles="ner"))
    assert batch["ner"].batch and not batch["caption"].batch
    with pytest.raises(ValueError, match="no role named"):
        role_calls(load_settings(llm_role_reasoning_effort="captions:low"))
    with pytest.raises(ValueError, match="waiting"):
        role_calls(load_settings(llm_deferred_roles="response"))
    with pytest.raises(ValueError, match="effort"):
        load_settings(llm_role_reasoning_effort="ner:lots")


def test_the_requests_carry_each_roles_effort_and_tier(fake_openai) -> None:
    roles = make_roles(fake_openai, llm_deferred_tier="flex")
    roles.direct.usage = sink = Recorded()
    body = chat_body('{"summary": "I cooked."}', "mini-model")
    body["service_tier"] = "flex"
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 5}
    fake_openai.chat.push(
        Reply(body=body),
        Reply.chat('{"named_entities": ["Lucia"]}'),
        Reply.chat('{"action": "ANSWER"}'),
    )
    asyncio.run(roles.merge_captions(["I cooked."], 180))
    asyncio.run(roles.ner("Lucia waved."))
    asyncio.run(roles.agent_step("What did I cook?", []))
    merge, ner, agent = fake_openai.chat_requests()
    assert (merge["reasoning_effort"], merge["service_tier"]) == ("minimal", "flex")
    assert ner["reasoning_effort"] == "minimal" and "service_tier" not in ner
    assert "reasoning_effort" not in agent and "service_tier" not in agent
    flex, direct, _ = sink.records
    assert (flex.dispatch, flex.reasoning_tokens) == ("flex", 5)
    assert (direct.dispatch, direct.reasoning_tokens) == ("direct", 0)


def test_roles_that_can_wait_go_through_the_batch_api(fake_openai) -> None:
    roles = make_roles(fake_openai, llm_deferred_tier="batch", llm_deferred_roles="consolidation")
    fake_openai.chat.push(
        Reply.chat('{"named_entities": []}'),
        Reply.chat('{"updated_triple": ["I", "likes", "tea"], "triples_to_remove": []}'),
    )
    asyncio.run(roles.ner("nothing"))
    new = Triple(subject="I", predicate="likes", object="tea")
    old = Triple(subject="I", predicate="likes", object="coffee")
    asyncio.run(roles.consolidate(new, [old]))
    paths = fake_openai.paths()
    assert paths[0] == "POST /v1/chat/completions"  # NER: direct
    assert "POST /v1/batches" in paths  # consolidation: a batch job
