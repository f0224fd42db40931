"""The MCP tools in-process (the SDK's Client on the server object) over a fake API on a real
socket: API errors become tool errors with the API's message, arguments reach the API as the
client sends them, forget asks the API nothing without confirm=true."""

from __future__ import annotations

from mcp import Client

from apps.client import AsyncWorldMMClient
from apps.mcp import build_server
from tests.fixtures.fake_query_api import fake_api

KEY = "wmm_fake"


async def test_api_errors_are_tool_errors_with_the_api_message():
    replies = [(403, {}, {"detail": "this API key belongs to another user"})]
    with fake_api(replies) as (url, script):
        async with AsyncWorldMMClient(url, KEY, "alice") as api, Client(build_server(api)) as mcp:
            result = await mcp.call_tool("list_segments", {"scale": 30})
    assert result.is_error
    text = result.content[0].text
    assert "this API key belongs to another user" in text and "403" in text
    assert script.seen[0].path == "/v1/users/alice/segments?scale=30&limit=50"


async def test_forget_without_confirm_never_reaches_the_api():
    with fake_api([]) as (url, script):
        async with AsyncWorldMMClient(url, KEY, "alice") as api, Client(build_server(api)) as mcp:
            span = {"start": "2026-11-20T10:00:00Z", "end": "2026-11-20T11:00:00Z"}
            result = await mcp.call_tool("forget", span)
    assert result.is_error and "confirm=true" in result.content[0].text
    assert script.seen == []


async def test_ask_passes_choices_and_as_of_and_retries_a_429():
    reply = {
        "answer": "A. tea",
        "provider": "offline",
        "as_of": "2026-11-20T12:00:00Z",
        "stopped": "answer",
        "rounds": [],
        "evidence": [],
        "triples": [],
        "frames": [],
    }
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    replies = [(429, {"retry-after": "1"}, {"detail": "rate limit"}), (200, {}, reply)]
    with fake_api(replies) as (url, script):
        api = AsyncWorldMMClient(url, KEY, "alice", sleep=sleep)
        async with api, Client(build_server(api)) as mcp:
            result = await mcp.call_tool(
                "ask",
                {
                    "question": "What did I drink?",
                    "choices": ["tea", "coffee"],
                    "as_of": "2026-11-20T12:00:00Z",
                },
            )
    assert not result.is_error, result
    assert result.structured_content["answer"] == "A. tea"
    assert waits == [1.0]
    assert script.seen[-1].body == {
        "question": "What did I drink?",
        "choices": ["tea", "coffee"],
        "as_of": "2026-11-20T12:00:00Z",
    }
