"""Thin confluent-kafka helpers: a producer with sane defaults, produce-and-flush with
delivery errors raised (never dropped), and a bounded "read everything" consumer for tests
and tools."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from worldmm.retry import KAFKA_QUEUE_FULL, call_with_retry

Headers = list[tuple[str, bytes]]

# Frames and DLQ copies of them can exceed librdkafka's 1 MB default; the broker's own
# limit still applies and comes back as a delivery error.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class DeliveryError(RuntimeError):
    """One or more messages were not acknowledged by the broker."""

    def __init__(self, failures: Sequence[str]) -> None:
        self.failures = list(failures)
        shown = "; ".join(self.failures[:5])
        more = f" (+{len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(f"{len(self.failures)} message(s) not delivered: {shown}{more}")


def producer_conf(brokers: str, **conf: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "bootstrap.servers": brokers,
        "acks": "all",
        "linger.ms": 5,
        "message.max.bytes": DEFAULT_MAX_MESSAGE_BYTES,
        "queue.buffering.max.kbytes": 256 * 1024,
    }
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return base


def make_producer(brokers: str, **conf: Any) -> Producer:
    """A producer; ``conf`` overrides defaults (``linger_ms=0`` is ``linger.ms``)."""
    return Producer(producer_conf(brokers, **conf))


@dataclass
class DeliveryTracker:
    """Delivery callback that counts acks and keeps every failure for :meth:`raise_if_failed`."""

    failures: list[str] = field(default_factory=list)

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failures.append(f"{msg.topic()}: {err.str()}")

    def raise_if_failed(self) -> None:
        if self.failures:
            failures, self.failures = self.failures, []
            raise DeliveryError(failures)


def produce(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None = None,
    *,
    on_delivery: Any = None,
) -> None:
    """Produce one message, waiting for room when the local queue is full (backpressure):
    the wait serves delivery reports (``poll``), which is what frees room."""

    def send() -> None:
        producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)

    try:
        send()  # first without the retry machinery, which costs more than a produce call
    except BufferError:
        call_with_retry(
            send,
            KAFKA_QUEUE_FULL,
            step="kafka.produce",
            retry_on=_queue_full,
            sleep=producer.poll,
            log_level=logging.DEBUG,  # backpressure is normal operation, not a fault
        )
    producer.poll(0)


def _queue_full(exc: BaseException) -> str | None:
    return "queue_full" if isinstance(exc, BufferError) else None


def flush(
    producer: Producer, tracker: DeliveryTracker | None = None, timeout: float = 30.0
) -> None:
    left = producer.flush(timeout)
    if left:
        raise DeliveryError([f"{left} message(s) still queued after {timeout:.0f}s"])
    if tracker is not None:
        tracker.raise_if_failed()


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    def header(self, name: str) -> str | None:
        for n, v in self.headers:
            if n == name:
                return v.decode() if v is not None else None
        return None


def consume_all(
    brokers: str,
    topic: str,
    group: str | None = None,
    timeout: float = 30.0,
    **conf: Any,
) -> list[ConsumedRecord]:
    """Everything in ``topic`` from offset 0 up to the high watermarks taken at the start.

    Ends when every partition has reached its high watermark (no idle-wait guessing), or
    raises TimeoutError after ``timeout`` seconds. Offsets are not committed.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": group or f"consume-all-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            **{k.replace("_", "."): v for k, v in conf.items()},
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=timeout)
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None:
            err = tmeta.error if tmeta else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            raise KafkaException(err)
        highs: dict[int, int] = {}
        for p in tmeta.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            highs[p] = high
        pending = {p for p, high in highs.items() if high > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in highs])
        out: list[ConsumedRecord] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(pending)} not read to the end")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            p, off = msg.partition(), msg.offset()
            if off < highs[p]:
                out.append(
                    ConsumedRecord(
                        topic=msg.topic(),
                        partition=p,
                        offset=off,
                        key=msg.key(),
                        value=msg.value(),
                        headers=list(msg.headers() or []),
                    )
                )
            if off + 1 >= highs[p]:
                pending.discard(p)
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()
