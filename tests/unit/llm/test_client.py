"""The LLM client against a real HTTP server speaking the OpenAI API (scripted)."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from prometheus_client import REGISTRY

from fakes.openai_server import Reply
from tests.fixtures.fake_openai import make_roles
from tests.fixtures.media import make_frame_jpeg
from worldmm.llm import AgentRound, ModelCallError, ParseError, build_roles
from worldmm.models import Triple
from worldmm.settings import load_settings


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_caption_request_shape(fake_openai):
    roles = make_roles(fake_openai, llm_max_completion_tokens=300, llm_reasoning_effort="low")
    fake_openai.chat.push(Reply.chat('{"caption": "I stood in the BAKERY."}'))
    frame = make_frame_jpeg("BAKERY")
    caption = asyncio.run(roles.caption([frame, frame], "Lucia: hello", ["OPEN 7-19"]))
    assert caption == "I stood in the BAKERY."
    (body,) = fake_openai.chat_requests()
    assert body["model"] == "mini-model"
    assert body["max_completion_tokens"] == 300
    assert body["reasoning_effort"] == "low"
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert system["role"] == "system" and '"caption"' in system["content"]
    text, *images = user["content"]
    assert "Lucia: hello" in text["text"] and "2 frames" in text["text"]
    assert "OPEN 7-19" in text["text"]  # the text read at full size goes with the frames
    assert len(images) == 2
    url = images[0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == frame
    # v2: rates importance; v3: is given the text read in the frames
    assert roles.versions["caption"].startswith("caption/v3-")
    assert roles.label == "compatible:mini-model+big-model"
    assert caption.importance is None  # the model gave no rating: construction estimates it


def test_caption_and_merge_carry_the_models_importance(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(
        Reply.chat('{"caption": "I booked the dentist for Friday.", "importance": 0.9}'),
        Reply.chat('{"summary": "I booked the dentist.", "importance": 1.7}'),
        Reply.chat('{"caption": "I walked.", "importance": "very"}'),
    )
    caption = asyncio.run(roles.caption([make_frame_jpeg("X")], ""))
    assert caption == "I booked the dentist for Friday." and caption.importance == 0.9
    summary = asyncio.run(roles.merge_captions([caption], 180))
    assert summary.importance == 1.0  # out of range: clamped, never a failed window
    assert asyncio.run(roles.caption([make_frame_jpeg("X")], "")).importance is None
    assert "importance" in fake_openai.chat_requests()[0]["messages"][0]["content"]


def test_rate_limit_then_success(fake_openai):
    roles = make_roles(fake_openai)
    before = metric(
        "worldmm_llm_retries_total", role="ner", provider="compatible", reason="rate_limit"
    )
    fake_openai.chat.push(
        Reply.error(429, "slow down", **{"retry-after": "0"}),
        Reply.chat('{"named_entities": ["Lucia"]}'),
    )
    assert asyncio.run(roles.ner("Lucia waved.")) == ["Lucia"]
    assert len(fake_openai.chat_requests()) == 2
    after = metric(
        "worldmm_llm_retries_total", role="ner", provider="compatible", reason="rate_limit"
    )
    assert after == before + 1


def test_the_sdk_never_retries_on_its_own(fake_openai):
    """With our policy at 0 retries a 429 fails after one request: the SDK client adds none."""
    roles = make_roles(fake_openai, llm_max_retries=0)

    async def sdk_retries() -> int:
        return roles.direct.client().max_retries

    assert asyncio.run(sdk_retries()) == 0
    fake_openai.chat.push(
        Reply.error(429, "slow down", **{"retry-after": "0"}),
        Reply.chat('{"named_entities": ["Lucia"]}'),
    )
    with pytest.raises(ModelCallError, match="after 1 attempt"):
        asyncio.run(roles.ner("Lucia waved."))
    assert len(fake_openai.chat_requests()) == 1


def test_timeout_then_success(fake_openai):
    roles = make_roles(fake_openai)  # 0.5 s timeout
    fake_openai.chat.push(
        Reply.chat('{"named_entities": ["late"]}', delay_s=2.0),
        Reply.chat('{"named_entities": ["Jake"]}'),
    )
    assert asyncio.run(roles.ner("Jake waved.")) == ["Jake"]
    assert len(fake_openai.chat_requests()) == 2


def test_server_errors_exhaust_retries(fake_openai):
    roles = make_roles(fake_openai, llm_max_retries=1)
    fake_openai.chat.push(*(Reply.error(503, **{"retry-after": "0"}) for _ in range(2)))
    with pytest.raises(ModelCallError) as info:
        asyncio.run(roles.ner("x"))
    assert info.value.status == 503
    assert len(fake_openai.chat_requests()) == 2


def test_client_error_is_not_retried(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(Reply.error(400, "bad request"))
    with pytest.raises(ModelCallError, match="bad request"):
        asyncio.run(roles.ner("x"))
    assert len(fake_openai.chat_requests()) == 1


def test_unparsable_reply_is_repaired_once(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(
        Reply.chat('{"triples": [["I", "holds"'),  # truncated
        Reply.chat('```json\n{"triples": [["I", "holds", "cup"]]}\n```'),
    )
    triples = asyncio.run(roles.episodic_triples("I hold a cup.", ["I", "cup"]))
    assert triples == [Triple(subject="I", predicate="holds", object="cup")]
    repair = fake_openai.chat_requests()[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"triples": [["I", "holds"'}
    assert "could not be used" in repair[-1]["content"]


def test_second_bad_reply_raises_parse_error(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(Reply.chat("no json here"), Reply.chat('{"wrong": 1}'))
    with pytest.raises(ParseError) as info:
        asyncio.run(roles.ner("x"))
    assert info.value.role == "ner" and info.value.raw == '{"wrong": 1}'


def test_agent_and_response_use_the_agent_model(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(
        Reply.chat('{"action": "SEARCH", "memory_type": "semantic", "query": "Lucia habits"}'),
        Reply.chat('{"answer": "A. flour"}'),
    )
    rounds = [AgentRound(memory_type="episodic", query="q", results_text="I bought flour.")]
    action = asyncio.run(roles.agent_step("What does Lucia like?", rounds))
    assert (action.memory_type, action.query) == ("semantic", "Lucia habits")
    reply = asyncio.run(roles.respond("What?", [], ["flour", "eggs"]))
    assert (reply.answer, reply.choice_index) == ("A. flour", 0)
    agent_body, response_body = fake_openai.chat_requests()
    assert agent_body["model"] == response_body["model"] == "big-model"
    assert "I bought flour." in agent_body["messages"][1]["content"]
    assert "B. eggs" in response_body["messages"][1]["content"]


def test_rerank_drops_unknown_ids_and_caps_keep(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(Reply.chat('{"ranked_ids": ["b", "zz", "a", "c"]}'))
    ranked = asyncio.run(roles.rerank("q", [("a", "x"), ("b", "y"), ("c", "z")], keep=2))
    assert ranked == ["b", "a"]


def test_semantic_and_consolidation_indices_are_checked(fake_openai):
    roles = make_roles(fake_openai)
    fake_openai.chat.push(
        Reply.chat(
            json.dumps({"semantic_triples": [["I", "likes", "tea"]], "episodic_evidence": [[0, 7]]})
        ),
        Reply.chat(
            json.dumps({"updated_triple": ["I", "likes", "green tea"], "triples_to_remove": [1, 9]})
        ),
    )
    episodic = [Triple(subject="I", predicate="drinks", object="tea")]
    extraction = asyncio.run(roles.semantic_triples("I drink tea daily.", episodic))
    assert extraction.episodic_evidence == [[0]]
    new = Triple(subject="I", predicate="likes", object="tea")
    decision = asyncio.run(roles.consolidate(new, [new, new]))
    assert decision.updated_triple.object == "green tea"
    assert decision.triples_to_remove == [1]


def test_batch_round_trip_with_a_failed_line_retried_directly(fake_openai):
    roles = make_roles(fake_openai, llm_dispatch="batch")
    fake_openai.chat.push(
        Reply.chat('{"named_entities": ["one"]}'),
        Reply.error(500, "line failed"),
        Reply.chat('{"named_entities": ["three"]}'),
        Reply.chat('{"named_entities": ["two"]}'),  # the direct retry of line 2
    )

    async def three_calls():
        return await asyncio.gather(roles.ner("1"), roles.ner("2"), roles.ner("3"))

    assert asyncio.run(three_calls()) == [["one"], ["two"], ["three"]]
    paths = fake_openai.paths()
    assert paths[0] == "POST /v1/files"
    assert paths[1] == "POST /v1/batches"
    assert paths.count("POST /v1/chat/completions") == 1  # only the failed line, directly
    assert paths[-1] == "POST /v1/chat/completions"
    upload = next(r.body for r in fake_openai.requests if r.path == "/v1/files")
    assert upload["purpose"] == "batch"
    lines = [json.loads(x) for x in upload["bytes"].decode().splitlines()]
    assert len(lines) == 3 and len({x["custom_id"] for x in lines}) == 3
    assert all(x["url"] == "/v1/chat/completions" for x in lines)
    assert [x["body"]["model"] for x in lines] == ["mini-model"] * 3
    assert "1" in lines[0]["body"]["messages"][1]["content"]


def test_failed_batch_job_falls_back_to_direct_calls(fake_openai):
    roles = make_roles(fake_openai, llm_dispatch="batch")
    fake_openai.batch_statuses = ["in_progress", "failed"]
    fake_openai.chat.push(Reply.chat('{"named_entities": ["x"]}'))
    assert asyncio.run(roles.ner("x")) == ["x"]
    assert fake_openai.paths().count("POST /v1/chat/completions") == 1


def test_openai_provider_without_key_is_a_clear_error():
    from worldmm.providers.clients import ProviderConfigError

    with pytest.raises(ProviderConfigError, match="WORLDMM_OPENAI_API_KEY"):
        build_roles(load_settings(llm_provider="openai", openai_api_key=None), embedder=None)
