"""Producer backpressure against real librdkafka, with no broker: a full local queue waits."""

from __future__ import annotations

from confluent_kafka import Producer

from connectors import kafka_io


def test_a_full_queue_waits_for_room_instead_of_dropping():
    # One message fits; with no broker it times out after 200 ms. The second produce must
    # wait (serving delivery reports) until that frees the room, then go in.
    conf = kafka_io.producer_conf(
        "127.0.0.1:9", queue_buffering_max_messages=1, message_timeout_ms=200
    )
    producer = Producer({**conf, "log_level": 0})  # quiet about the refused connection
    tracker = kafka_io.DeliveryTracker()
    kafka_io.produce(producer, "t", b"k", b"first", on_delivery=tracker)
    kafka_io.produce(producer, "t", b"k", b"second", on_delivery=tracker)
    assert tracker.failures == ["t: Local: Message timed out"]  # the first, reported
    # the second was queued, not dropped: it gets its own report. (len(producer) also counts
    # pending events, such as the refused connection's, so it is not asserted on.)
    assert producer.flush(5) == 0
    assert tracker.failures == ["t: Local: Message timed out"] * 2
