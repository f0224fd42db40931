"""A DLQ record never exceeds what the broker takes: a larger copy goes without its payload
and says so, and one the broker still refuses as too large is sent again without it
(issue #42: a bad record over librdkafka's 1 MB default took the worker down)."""

from __future__ import annotations

from connectors.dlq import (
    ORIG_HEADERS_DROPPED,
    DlqProducer,
    fit,
    parse_dlq_record,
    record_size,
)
from tests.fixtures.dlq_broker import RefusingBroker, dlq_record


def test_fit_keeps_small_records_and_drops_payloads_then_copied_headers() -> None:
    small = dlq_record(b"x" * 100)
    assert fit(small, 4096) is small
    big = fit(dlq_record(b"x" * 10_000), 4096)
    entry = parse_dlq_record(big.key, big.value, big.headers)
    assert entry.value is None and entry.payload_dropped == 10_000
    assert entry.reason == "bad_jpeg" and entry.source_offset == 7
    assert record_size(big) < 4096
    # the sender's headers can be what is large: they go too, counted
    heavy = fit(dlq_record(b"x", [(f"h{i}", b"y" * 1000) for i in range(8)]), 4096)
    assert record_size(heavy) < 4096 and heavy.header(ORIG_HEADERS_DROPPED) == "8"
    assert parse_dlq_record(heavy.key, heavy.value, heavy.headers).reason == "bad_jpeg"


def test_a_record_the_broker_refuses_as_too_large_goes_again_without_payload() -> None:
    broker = RefusingBroker(limit=1000)
    dlq = DlqProducer(broker, "t.dlq", max_record_bytes=1_000_000)
    dlq.send(dlq_record(b"x" * 5000))
    dlq.send(dlq_record(b"y" * 10))
    dlq.flush()
    assert [v for v, _ in broker.stored] == [b"y" * 10, None]
    assert dict(broker.stored[1][1])["payload_dropped"] == b"5000"
    assert dlq.payloads_dropped == 1
