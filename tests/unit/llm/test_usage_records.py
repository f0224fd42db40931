"""Usage records: whose a call is, what the API reported, how records add up."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from query_api.ops.usage import BadRange, usage_range
from worldmm.llm.prompts import RenderedPrompt
from worldmm.llm.request import build_request, result_from_body
from worldmm.llm.usage_ledger import UsageRecord, aggregate, current_user, day_start, for_user


def test_the_user_reaches_threads_and_tasks_started_in_the_block() -> None:
    async def work() -> tuple:
        with for_user("alice"):
            in_thread = await asyncio.to_thread(current_user)
            in_task = await asyncio.create_task(asyncio.sleep(0, current_user()))
        return in_thread, in_task, current_user()

    assert asyncio.run(work()) == ("alice", "alice", None)


def test_a_request_carries_its_user_through_a_repair() -> None:
    prompt = RenderedPrompt("system", "user", "ner/v1-x")
    request = build_request("ner", "gpt-5-mini", prompt, user_id="bob")
    repaired = request.with_repair("not json", "no JSON object")
    assert repaired.user_id == "bob" and repaired.prompt_version == "ner/v1-x"
    assert len(repaired.messages) == 4 and "user_id" not in repaired.body()


def test_reported_usage_includes_cached_tokens() -> None:
    body = {
        "model": "gpt-5-mini-2025-08-07",
        "choices": [{"message": {"content": "{}"}}],
        "usage": {
            "prompt_tokens": 1200,
            "completion_tokens": 80,
            "prompt_tokens_details": {"cached_tokens": 1024},
        },
    }
    result = result_from_body(body)
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (
        1200,
        80,
        1024,
    )
    del body["usage"]["prompt_tokens_details"]
    assert result_from_body(body).cached_tokens == 0


def test_reported_usage_keeps_reasoning_tokens_apart() -> None:
    body = {
        "model": "gpt-5-mini",
        "service_tier": "flex",
        "choices": [{"message": {"content": "{}"}}],
        "usage": {
            "prompt_tokens": 300,
            "completion_tokens": 250,
            "completion_tokens_details": {"reasoning_tokens": 192},
        },
    }
    result = result_from_body(body)
    assert (result.completion_tokens, result.reasoning_tokens) == (250, 192)
    assert result.service_tier == "flex"
    del body["usage"]["completion_tokens_details"]
    assert result_from_body(body).reasoning_tokens == 0


def test_records_add_up_per_user_minute_role_and_model() -> None:
    def rec(user, second, role="ner", p=10, c=2, k=1, r=1):
        at = datetime(2026, 5, 4, 9, 10, second, tzinfo=UTC)
        return UsageRecord(at, user, role, "gpt-5-mini", "openai", "direct", p, c, k, r)

    rows = aggregate([rec("a", 1), rec("a", 59, p=5), rec("a", 30, "caption"), rec("b", 2)])
    got = {(k.user_id, k.role, k.minute.minute): dict(v) for k, v in rows.items()}
    one = {"calls": 1, "prompt": 10, "completion": 2, "cached": 1, "reasoning": 1}
    assert got == {
        ("a", "ner", 10): {"calls": 2, "prompt": 15, "completion": 4, "cached": 2, "reasoning": 2},
        ("a", "caption", 10): one,
        ("b", "ner", 10): one,
    }


def test_usage_ranges_default_to_today_and_are_bounded() -> None:
    now = datetime(2026, 5, 4, 15, 30, tzinfo=UTC)
    assert usage_range(None, None, now) == (day_start(now), now)
    with pytest.raises(BadRange, match="before"):
        usage_range(now, now, now)
    with pytest.raises(BadRange, match="366"):
        usage_range(datetime(2025, 1, 1, tzinfo=UTC), now, now)
