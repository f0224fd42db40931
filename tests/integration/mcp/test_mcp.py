"""`worldmm mcp` driven by the MCP SDK's own client, over stdio and streamable HTTP, against
the real API on the embedded stack: the five tools, scoping to the key's user, `forget` only
with confirm=true, bad arguments and a bad key as clear errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from deploy.stack.process import free_port
from tests.fixtures.wearers import DAY, seed_wearer

pytestmark = pytest.mark.integration


def mcp_command(api_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "apps.cli", "mcp", "--api", api_url, *extra]


def key_env(key: str) -> dict[str, str]:
    return {"WORLDMM_API_KEY": key, "PYTHONPATH": os.getcwd()}


@contextmanager
def http_mcp_server(api_url: str, key: str) -> Iterator[str]:
    """`worldmm mcp --http PORT` as a child process; yields its /mcp URL once it listens."""
    port = free_port()
    proc = subprocess.Popen(
        mcp_command(api_url, "--http", str(port)),
        env={**os.environ, **key_env(key)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # ready when the port accepts connections
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "worldmm mcp --http did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def _stdio(api_url: str, key: str) -> Client:
    cmd = mcp_command(api_url)
    return Client(
        StdioServerParameters(command=cmd[0], args=cmd[1:], env=key_env(key), cwd=os.getcwd())
    )


def _error_text(result) -> str:
    assert result.is_error, result
    return " ".join(c.text for c in result.content if c.type == "text")


async def test_tools_over_stdio(served):
    alice = seed_wearer(served.deps, "mcp-alice")
    async with _stdio(served.url, alice.key) as mcp:
        names = {t.name for t in (await mcp.list_tools()).tools}
        assert names == {
            "ask", "search_memory", "list_segments", "remember", "forget", "profile",
            "set_timezone", "forget_recent", "pause_recording", "resume_recording",
        }  # fmt: skip

        me = await mcp.call_tool("profile", {})
        assert me.structured_content["user_id"] == alice.user_id
        assert me.structured_content["timezone"] == "UTC"
        moved = await mcp.call_tool("set_timezone", {"timezone": "Asia/Tokyo"})
        assert moved.structured_content["timezone"] == "Asia/Tokyo"
        assert "timezone" in _error_text(
            await mcp.call_tool("set_timezone", {"timezone": "Nope/X"})
        )

        asked = await mcp.call_tool("ask", {"question": "Where did I put my car keys?"})
        assert not asked.is_error, asked
        reply = asked.structured_content
        assert reply["provider"] == "offline"
        assert alice.segments[0] in {e["segment_id"] for e in reply["evidence"]}

        choice = await mcp.call_tool(
            "ask",
            {
                "question": "Where did I put my car keys?",
                "choices": ["in the blue bowl", "in the fridge"],
                "as_of": (DAY + timedelta(hours=1)).isoformat(),
            },
        )
        assert not choice.is_error, choice
        assert choice.structured_content["as_of"].startswith(DAY.date().isoformat())

        found = await mcp.call_tool(
            "search_memory", {"memory_type": "episodic", "query": "basil plant"}
        )
        assert not found.is_error, found
        hits = found.structured_content["results"]
        assert alice.segments[2] in {h["segment_id"] for h in hits}

        listed = await mcp.call_tool("list_segments", {"scale": 30, "limit": 10})
        assert [s["id"] for s in listed.structured_content["items"]] == alice.segments

        noted = await mcp.call_tool(
            "remember", {"text": "My bike lock code is the year I moved to Lisbon."}
        )
        assert not noted.is_error, noted
        assert noted.structured_content["segment_id"] > 0

        # forget: refused without confirm=true, and nothing is gone
        span = {"start": DAY.isoformat(), "end": (DAY + timedelta(seconds=30)).isoformat()}
        refused = await mcp.call_tool("forget", span)
        assert "confirm=true" in _error_text(refused)
        refused = await mcp.call_tool("forget", {**span, "confirm": False})
        assert "confirm=true" in _error_text(refused)
        the_day = {"start": DAY.isoformat(), "end": (DAY + timedelta(hours=1)).isoformat()}
        listed = await mcp.call_tool("list_segments", {**the_day, "scale": 30})
        assert len(listed.structured_content["items"]) == 4  # the note lies outside the day
        done = await mcp.call_tool("forget", {**span, "confirm": True})
        assert not done.is_error, done
        assert done.structured_content["rows_deleted"]["segments"] >= 1
        listed = await mcp.call_tool("list_segments", {**the_day, "scale": 30})
        assert [s["id"] for s in listed.structured_content["items"]] == alice.segments[1:]

        # forget_recent: "forget what just happened" takes the note remembered just now
        refused = await mcp.call_tool("forget_recent", {"minutes": 10})
        assert "confirm=true" in _error_text(refused)
        done = await mcp.call_tool("forget_recent", {"minutes": 10, "confirm": True})
        assert not done.is_error, done
        assert done.structured_content["rows_deleted"]["segments"] >= 1
        listed = await mcp.call_tool("list_segments", {"scale": 30, "limit": 50})
        assert [s["id"] for s in listed.structured_content["items"]] == alice.segments[1:]
        bad = await mcp.call_tool("forget_recent", {"minutes": 0, "confirm": True})
        assert "minutes" in _error_text(bad)

        # bad arguments: clear tool errors, the server stays up
        bad = await mcp.call_tool("search_memory", {"memory_type": "dreams", "query": "x"})
        assert "memory_type" in _error_text(bad)
        bad = await mcp.call_tool("ask", {"question": "when?", "as_of": "2026-11-20T10:00"})
        assert "timezone" in _error_text(bad).lower()
        bad = await mcp.call_tool("list_segments", {"cursor": "not-a-cursor"})
        assert "invalid cursor" in _error_text(bad)
        bad = await mcp.call_tool(
            "forget", {"start": span["end"], "end": span["start"], "confirm": True}
        )
        assert "before" in _error_text(bad)
        bad = await mcp.call_tool("ask", {"question": "   "})
        assert "blank" in _error_text(bad)
        assert not (await mcp.call_tool("list_segments", {"limit": 1})).is_error


async def test_streamable_http_is_scoped_to_the_keys_user(served):
    alice = seed_wearer(served.deps, "mcp-owner")
    bob = seed_wearer(
        served.deps,
        "mcp-other",
        scenes=[("Bob fed the cat in the garden.", [("Bob", "fed", "cat")])],
        start=DAY - timedelta(days=2),
    )
    with http_mcp_server(served.url, bob.key) as url:
        async with Client(url) as mcp:
            listed = await mcp.call_tool("list_segments", {})
            ids = {s["id"] for s in listed.structured_content["items"]}
            assert bob.segments[0] in ids
            assert not ids & {*alice.segments, alice.parent}

            asked = await mcp.call_tool("ask", {"question": "Where did I put my car keys?"})
            assert not asked.is_error, asked
            reply = asked.structured_content
            assert "blue bowl" not in json.dumps([reply["evidence"], reply["rounds"]])
            assert not {e["segment_id"] for e in asked.structured_content["evidence"]} & set(
                alice.segments
            )
            found = await mcp.call_tool(
                "search_memory", {"memory_type": "episodic", "query": "car keys blue bowl"}
            )
            assert "blue bowl" not in json.dumps(found.structured_content["results"])

            # forgetting through bob's key cannot touch alice's day
            day = {"start": DAY.isoformat(), "end": (DAY + timedelta(hours=1)).isoformat()}
            gone = await mcp.call_tool("forget", {**day, "confirm": True})
            assert gone.structured_content["rows_deleted"].get("segments", 0) == 0
    r = served.deps.db.connection
    with r() as conn:
        left = conn.execute(
            "SELECT count(*) FROM segments WHERE user_id = %s", (alice.user_id,)
        ).fetchone()[0]
    assert left == 5


def test_a_bad_key_is_a_clear_error_at_start(served):
    run = subprocess.run(
        mcp_command(served.url),
        env={**os.environ, **key_env("wmm_not-a-key")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "refused the key: invalid API key" in run.stderr
    assert "wmm_not-a-key" not in run.stderr + run.stdout
