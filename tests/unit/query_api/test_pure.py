"""Pure pieces of the query API: cursors, note windows, URLs, cache patterns, blob deletion,
mapping an agent result onto the wire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from query_api.cursors import CursorError, decode_cursor, encode_cursor
from query_api.ops.forget import user_cache_pattern
from query_api.ops.query import RoundsOutOfRange, check_rounds, frame_url, to_response
from query_api.ops.remember import note_window
from tests.fixtures.hits import window_hit
from worldmm.agent import AgentResult, RoundRecord
from worldmm.graph.cache import cache_key
from worldmm.memory.retrieval import FrameHit, SegmentHit
from worldmm.store.input_gaps import InputGapSpan
from worldmm.wire.schemas import QueryRequest

T = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


def test_cursor_round_trips_and_rejects_forgeries():
    ts = T + timedelta(microseconds=1234)
    assert decode_cursor(encode_cursor(ts, 42)) == (ts, 42)
    for bad in ("garbage!", "e30", encode_cursor(T, 1)[:-3], "WyIyMDI1LTAzLTAxVDEwOjAwOjAwIiwgMV0"):
        with pytest.raises(CursorError):
            decode_cursor(bad)  # the last one is a naive timestamp


def test_note_window_ends_at_the_note_and_stays_off_the_ingest_grid():
    start, end = note_window(T, set())  # T - 30 s is on the 30 s grid: nudged by 1 ms
    assert end == T and start == T - timedelta(seconds=30) + timedelta(milliseconds=1)
    again, _ = note_window(T, {start})
    assert again == start + timedelta(milliseconds=1)
    off = T + timedelta(seconds=7)
    assert note_window(off, set()) == (off - timedelta(seconds=30), off)


def test_frame_url_keeps_key_slashes_and_escapes_the_user():
    url = frame_url("a@b", "frames/a@b/s 1/1-0.jpg")
    assert url == "/v1/users/a@b/frames/frames/a@b/s%201/1-0.jpg"


def test_cache_pattern_matches_the_cache_keys_of_that_user_only():
    import fnmatch

    pattern = user_cache_pattern("a:b*")
    assert fnmatch.fnmatchcase(cache_key("a:b*", "episodic", 30), pattern)
    assert fnmatch.fnmatchcase(cache_key("a:b*", "semantic"), pattern)
    assert not fnmatch.fnmatchcase(cache_key("a:bc", "semantic"), pattern)
    assert not fnmatch.fnmatchcase(cache_key("a", "semantic"), pattern)


def test_check_rounds_limits_to_the_server_setting():
    deps = SimpleNamespace(settings=SimpleNamespace(agent_max_rounds=3))
    assert check_rounds(deps, None) is None and check_rounds(deps, 3) == 3
    for bad in (0, 4):
        with pytest.raises(RoundsOutOfRange, match="between 1 and 3"):
            check_rounds(deps, bad)


def test_agent_result_maps_to_the_wire_with_frame_urls():
    seg = SegmentHit(
        segment_id=7,
        scale=30,
        start=T,
        end=T + timedelta(seconds=30),
        text="I cooked rice.",
        score=0.5,
    )
    frame = FrameHit(key="frames/u1/s/1-0.jpg", ts=T, segment_id=7, score=0.2)
    rounds = [
        RoundRecord(memory_type="episodic", query="cooking", results=[seg]),
        RoundRecord(memory_type="visual", query="rice pot", results=[frame]),
    ]
    result = AgentResult.assemble("Rice.", rounds, "offline", "answer")
    out = to_response(result, "u1", QueryRequest(question="What did I cook?"))
    assert out.answer == "Rice." and out.provider == "offline" and out.stopped == "answer"
    assert [e.segment_id for e in out.evidence] == [7]
    assert out.frames == ["/v1/users/u1/frames/frames/u1/s/1-0.jpg"]
    assert out.rounds[1].results[0]["url"] == out.frames[0]
    assert out.rounds[0].results[0]["text"] == "I cooked rice."
    assert out.evidence[0].input_lost is False
    gap = InputGapSpan("t", 0, 1, 2, "offsets_reused", T - timedelta(seconds=5), T)
    lost = to_response(result, "u1", QueryRequest(question="What did I cook?"), gaps=[gap])
    assert lost.evidence[0].input_lost is True  # the lost input's span reaches the window


def test_a_free_form_answer_cites_the_window_it_comes_from():
    segs = [window_hit(i, T, f"window {i}") for i in (3, 4)]
    rounds = [RoundRecord(memory_type="episodic", query="cooking", results=segs)]
    # refs the answerer cites: a segment, a fact (not a window) and one never retrieved
    result = AgentResult.assemble("Rice.", rounds, "offline", "answer", cited=["S4", "F1", "S9"])
    assert result.cited_segment_ids == [4]
    out = to_response(result, "u1", QueryRequest(question="What did I cook?"))
    assert [(c.segment_id, c.start, c.end) for c in out.cited] == [
        (4, T + timedelta(seconds=120), T + timedelta(seconds=150))
    ]
