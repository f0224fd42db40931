"""Pieces of the dataflow metrics: consumer lag from watermarks, model calls timed by role for
any model object, and the endpoint's once-per-port start."""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest
from prometheus_client import REGISTRY

from dataflows import ingest_metrics


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_lag_is_high_watermark_minus_next_offset() -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    tracker = ingest_metrics.LagTracker("unused:9092")
    tracker.seen(topic, 0, 9)  # offsets 0..9 read: next is 10
    tracker.seen(topic, 1, None)  # no offset (a test source): ignored
    tracker.refresh(lambda *_, **__: (0, 25))
    assert _value("worldmm_ingest_consumer_lag", topic=topic, partition="0") == 15
    assert _value("worldmm_ingest_consumer_lag", topic=topic, partition="1") is None

    def broker_down(*_, **__):
        raise RuntimeError("broker down")

    tracker.seen(topic, 0, 24)
    tracker.refresh(broker_down)  # a failed probe leaves the last value
    assert _value("worldmm_ingest_consumer_lag", topic=topic, partition="0") == 15
    tracker.refresh(lambda *_, **__: (0, 25))
    assert _value("worldmm_ingest_consumer_lag", topic=topic, partition="0") == 0


class Model:
    label = "fake"

    async def caption(self, frames, transcript: str, seen_text=None) -> str:
        return "I saw " + transcript

    async def ner(self, text: str) -> list[str]:
        raise ValueError("bad reply")

    def transcribe(self, audio: bytes, **kw) -> str:
        return "hello"


def test_timed_model_counts_calls_by_role_and_outcome() -> None:
    def count(role: str, outcome: str) -> float:
        return _value("worldmm_ingest_model_calls_total", role=role, outcome=outcome) or 0.0

    before = (count("caption", "ok"), count("ner", "error"), count("asr", "ok"))
    roles = ingest_metrics.TimedModel(Model())
    asr = ingest_metrics.TimedModel(Model(), lambda name: "asr")
    assert roles.label == "fake"  # attributes pass through
    assert asyncio.run(roles.caption([], "Bob")) == "I saw Bob"
    with pytest.raises(ValueError):
        asyncio.run(roles.ner("x"))
    assert asr.transcribe(b"") == "hello"
    after = (count("caption", "ok"), count("ner", "error"), count("asr", "ok"))
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]
    assert _value("worldmm_ingest_model_seconds_count", role="caption") >= 1


def test_serve_once_per_port_and_never_fatal() -> None:
    assert ingest_metrics.serve(0) is False  # off
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert ingest_metrics.serve(port) is False  # in use: logged, not raised
        assert ingest_metrics.serve(port) is False  # and not retried
