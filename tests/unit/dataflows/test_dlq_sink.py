"""The flow's DLQ sink never raises into the flow: a record it cannot deliver is logged and
counted (worldmm_ingest_dlq_delivery_failures_total)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from dataflows.dlq_sink import DlqSink
from tests.fixtures.dlq_broker import RefusingBroker, dlq_record


def _failures() -> float:
    return REGISTRY.get_sample_value("worldmm_ingest_dlq_delivery_failures_total") or 0.0


def _dropped() -> float:
    return REGISTRY.get_sample_value("worldmm_ingest_dlq_payloads_dropped_total") or 0.0


def test_delivery_failures_are_counted_not_raised() -> None:
    sink = DlqSink("unused:9092", "t.dlq", 4096, producer_factory=lambda: RefusingBroker(0, True))
    part = sink.build("dlq", 0, 1)
    before = _failures()
    part.write_batch([dlq_record(b"x"), dlq_record(b"y")])
    assert _failures() == before + 2


def test_oversize_records_go_without_payload_and_are_counted() -> None:
    broker = RefusingBroker(limit=10**9)
    part = DlqSink("unused:9092", "t.dlq", 4096, producer_factory=lambda: broker).build("d", 0, 1)
    before = _dropped()
    part.write_batch([dlq_record(b"x" * 50_000)])
    assert broker.stored[0][0] is None and _dropped() == before + 1
