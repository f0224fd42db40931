"""Real protocol round trips against the embedded servers."""

from __future__ import annotations

import uuid

import pytest
import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from connectors.topics import create_topics, topic_names

pytestmark = pytest.mark.integration


def test_topics_created_with_configured_partitions(stack, settings):
    settings = settings.model_copy(update={"topic_partitions": 3})
    first = create_topics(stack.kafka_brokers, settings)
    assert set(first.values()) == {"created"}
    again = create_topics(stack.kafka_brokers, settings)  # idempotent
    assert set(again.values()) == {"exists"}
    meta = AdminClient({"bootstrap.servers": stack.kafka_brokers}).list_topics(timeout=10)
    assert {name: len(meta.topics[name].partitions) for name in topic_names(settings).values()} == {
        name: 3 for name in topic_names(settings).values()
    }


def test_message_with_headers_round_trips_through_a_consumer_group(stack, settings):
    create_topics(stack.kafka_brokers, settings)
    topic = topic_names(settings)["frames"]
    headers = [
        ("user_id", b"alice"),
        ("session_id", b"s1"),
        ("ts", b"1700000000000"),
        ("seq", b"7"),
        ("content_type", b"image/jpeg"),
    ]
    payload = bytes(range(256)) * 4
    producer = Producer({"bootstrap.servers": stack.kafka_brokers})
    producer.produce(topic, key=b"alice", value=payload, headers=headers)
    assert producer.flush(10) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": stack.kafka_brokers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    try:
        msg = None
        for _ in range(60):  # bounded: each poll waits for a real event, up to 0.5 s
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None
        assert msg.key() == b"alice"
        assert msg.value() == payload
        assert msg.headers() == headers
        consumer.commit(msg, asynchronous=False)
        committed = consumer.committed(
            [TopicPartition(topic, msg.partition())],
            timeout=10,
        )
        assert committed[0].offset == msg.offset() + 1
    finally:
        consumer.close()


def test_redis_ping(stack):
    client = redis.Redis.from_url(stack.redis_url)
    assert client.ping() is True
    client.close()
