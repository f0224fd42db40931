"""DLQ record builders and their parser (the retry path reads them back)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from connectors import codec
from connectors.dlq import (
    DlqMessageEntry,
    DlqWindowEntry,
    message_dlq_record,
    parse_dlq_record,
    window_dlq_record,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_message_record_keeps_payload_and_original_headers():
    key, value, headers = codec.encode_control("u1", "s1", NOW, "session_end")
    rec = message_dlq_record(
        reason="bad_control",
        detail="x" * 5000,
        source_topic="worldmm.control",
        source_partition=3,
        source_offset=42,
        key=key,
        value=value,
        headers=headers,
        failed_at=NOW,
    )
    assert rec.key == key and rec.value == value
    assert rec.header("reason") == "bad_control"
    assert rec.header("source_topic") == "worldmm.control"
    assert rec.header("source_partition") == "3" and rec.header("source_offset") == "42"
    assert rec.header("failed_at") == str(codec.to_epoch_ms(NOW))
    assert len(rec.header("detail")) == 2000
    assert (
        rec.header("orig.user_id") == "u1" and rec.header("orig.ts") == dict(headers)["ts"].decode()
    )

    entry = parse_dlq_record(rec.key, rec.value, rec.headers)
    assert isinstance(entry, DlqMessageEntry)
    assert entry.original_headers == headers  # a retry re-produces the exact record
    assert (entry.source_partition, entry.source_offset, entry.failed_at) == (3, 42, NOW)
    # and the re-produced record decodes again
    again = codec.decode(
        "control",
        entry.key,
        entry.value,
        entry.original_headers,
        now=NOW,
        limits=codec.CodecLimits(),
    )
    assert again.event == "session_end"


def test_message_record_without_value_or_offsets():
    rec = message_dlq_record(
        reason="empty_payload",
        source_topic="t",
        source_partition=None,
        source_offset=None,
        key=None,
        value=None,
        headers=None,
        failed_at=NOW,
    )
    names = [n for n, _ in rec.headers]
    assert "source_offset" not in names and "detail" not in names
    entry = parse_dlq_record(rec.key, rec.value, rec.headers)
    assert entry.source_offset is None and entry.value is None


def test_window_record_round_trip():
    start = NOW - timedelta(minutes=3)
    rec = window_dlq_record(
        reason="llm_failed",
        user_id="u1",
        scale_seconds=180,
        window_start=start,
        failed_at=NOW,
        session_id="s1",
        error="timeout after 60s",
        extra={"attempts": 4},
    )
    assert rec.key == b"u1"
    assert rec.header("scale") == "180"
    assert rec.header("window_start") == str(codec.to_epoch_ms(start))
    body = json.loads(rec.value)
    assert body["attempts"] == 4 and body["error"] == "timeout after 60s"
    entry = parse_dlq_record(rec.key, rec.value, rec.headers)
    assert isinstance(entry, DlqWindowEntry)
    assert (entry.user_id, entry.scale_seconds, entry.window_start, entry.session_id) == (
        "u1",
        180,
        start,
        "s1",
    )


def test_parse_rejects_foreign_records():
    with pytest.raises(ValueError, match="not a WorldMM DLQ"):
        parse_dlq_record(b"k", b"v", [("x", b"1")])
    with pytest.raises(ValueError, match="malformed"):
        parse_dlq_record(b"k", b"v", [("dlq_kind", b"window"), ("reason", b"r")])
