"""Kafka input for the ingest flow that idles when there is nothing to read.

librdkafka keeps fetching whatever the application does, and a broker that answers an empty
fetch at once (the embedded noida-db; a real one after an unclean restart) turns that into a
busy loop. So a partition that has caught up is parked: unassigned, its high watermark probed
now and then (``first_s`` doubling to ``max_s``), and assigned again at its position when
there is more. Bounded reads (``tail=False``) never park. The state is the next offset to
read, as in Bytewax's own ``KafkaSource``. What it costs and saves: docs/benchmarks/ingest.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

log = logging.getLogger("worldmm.kafka_source")

FETCH_EVERY_MS = 20


@dataclass(frozen=True)
class SourceRecord:
    """One record as the flow reads it (no client object survives past the source)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True)
class Pacing:
    """When a partition stops fetching and how often a parked one looks for new records."""

    grace_s: float = 0.1  # reading: park after this long without a record since the assign
    idle_s: float = 0.02  # ...or this long after the last record once records came
    first_s: float = 0.01  # parked: first look at the high watermark after this long
    max_s: float = 0.25  # parked: looks every first_s, doubling up to this
    poll_s: float = 0.002  # reading with nothing queued: ask Bytewax to call again after this


class Pacer:
    """The reading / parked state of one partition, driven by the clock (pure)."""

    def __init__(self, pacing: Pacing, now: float) -> None:
        self.pacing = pacing
        self.parked = False
        self.last_record = now
        self.read_any = False  # records came since the (re-)assign
        self.interval = pacing.first_s
        self.next_probe = now

    def records(self, now: float) -> None:
        self.last_record = now
        self.read_any = True
        self.interval = self.pacing.first_s

    def should_park(self, now: float) -> bool:
        """A partition waits ``grace_s`` for its first records after an assign (their fetch
        takes a while), then only ``idle_s`` after the last one: assigned and caught up, the
        consumer fetches in a loop (about ten thousand empty fetches a second against the
        embedded broker), so a burst's tail is the time to stop."""
        wait = self.pacing.idle_s if self.read_any else self.pacing.grace_s
        return not self.parked and now - self.last_record >= wait

    def park(self, now: float) -> None:
        self.parked = True
        self.interval = self.pacing.first_s
        self.next_probe = now + self.interval

    def probe_due(self, now: float) -> bool:
        return self.parked and now >= self.next_probe

    def nothing_new(self, now: float) -> None:
        """A probe found no new record: look again later, less often."""
        self.interval = min(self.interval * 2, self.pacing.max_s)
        self.next_probe = now + self.interval

    def unpark(self, now: float) -> None:
        self.parked = False
        self.last_record = now  # the grace runs from the re-assign
        self.read_any = False

    def wake(self, now: float) -> float:
        """Seconds from ``now`` until the partition wants to be called again."""
        if self.parked:
            return max(0.0, self.next_probe - now)
        return self.pacing.poll_s


def consumer_config(brokers: str, tail: bool, extra: dict[str, Any] | None = None) -> dict:
    return {
        "bootstrap.servers": brokers,
        # Offsets live in the Bytewax recovery state; no group is joined, none committed.
        "group.id": "worldmm-ingest",
        "enable.auto.commit": False,
        "enable.partition.eof": not tail,
        # A fetch that brought records is followed by the next one only after this wait:
        # a busy partition is read in batches instead of one fetch per record.
        "queued.min.messages": 1,
        "fetch.queue.backoff.ms": FETCH_EVERY_MS,
        "fetch.wait.max.ms": 500,  # honoured by real brokers: an empty fetch waits there
        **(extra or {}),
    }


class KafkaPartition(StatefulSourcePartition[SourceRecord, int]):
    """One topic partition, read from ``offset`` (the next offset to read)."""

    def __init__(
        self,
        consumer: Any,
        topic: str,
        partition: int,
        offset: int,
        *,
        tail: bool,
        batch_size: int,
        pacing: Pacing,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from confluent_kafka import TopicPartition

        self._tp = TopicPartition
        self.consumer = consumer
        self.topic, self.partition = topic, partition
        self.offset = offset
        self.tail = tail
        self.batch_size = batch_size
        self.clock = clock
        self.pacer = Pacer(pacing, clock())
        self._eof = False
        self._wake: datetime | None = None
        self.consumer.assign([self._tp(topic, partition, offset)])

    def next_batch(self) -> list[SourceRecord]:
        if self._eof:
            raise StopIteration()
        now = self.clock()
        if self.pacer.parked:
            if self.pacer.probe_due(now):
                self._probe(now)
            self._set_wake(now)
            if self.pacer.parked:
                return []
        batch = self._read()
        now = self.clock()
        if batch:
            self.pacer.records(now)
        elif self.tail and self.pacer.should_park(now):
            self.consumer.unassign()
            self.pacer.park(now)
        self._set_wake(now, empty=not batch)
        return batch

    def _read(self) -> list[SourceRecord]:
        from confluent_kafka import KafkaError

        out: list[SourceRecord] = []
        for msg in self.consumer.consume(self.batch_size, 0):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._eof = True
                    break
                log.error(
                    "kafka_error topic=%s partition=%d error=%s", self.topic, self.partition, err
                )
                continue
            out.append(
                SourceRecord(
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    list(msg.headers() or []),
                )
            )
        if out:
            self.offset = out[-1].offset + 1
        return out

    def _probe(self, now: float) -> None:
        """Parked: is there a record past the position? Then assign again at it."""
        try:
            low, high = self.consumer.get_watermark_offsets(
                self._tp(self.topic, self.partition), timeout=0.5, cached=False
            )
        except Exception as exc:  # noqa: BLE001 - a broker hiccup: look again later
            log.debug("watermark_probe_failed topic=%s error=%s", self.topic, exc)
            self.pacer.nothing_new(now)
            return
        position = self.offset if self.offset >= 0 else low
        if high > position:
            self.consumer.assign([self._tp(self.topic, self.partition, self.offset)])
            self.pacer.unpark(now)
        else:
            self.pacer.nothing_new(now)

    def _set_wake(self, now: float, empty: bool = True) -> None:
        if not empty:
            self._wake = None  # more may be queued: call again at once
            return
        self._wake = datetime.now(UTC) + timedelta(seconds=self.pacer.wake(now))

    def next_awake(self) -> datetime | None:
        return self._wake

    def snapshot(self) -> int:
        return self.offset

    def close(self) -> None:
        self.consumer.close()


class IdleKafkaSource(FixedPartitionedSource[SourceRecord, int]):
    """Every partition of ``topics`` as a Bytewax input, each with its own paced consumer."""

    def __init__(
        self,
        brokers: str,
        topics: list[str],
        *,
        tail: bool = True,
        batch_size: int = 500,
        pacing: Pacing = Pacing(),  # noqa: B008 - frozen
        config: dict[str, Any] | None = None,
    ) -> None:
        self.brokers = brokers
        self.topics = list(topics)
        self.tail = tail
        self.batch_size = batch_size
        self.pacing = pacing
        self.config = config

    def list_parts(self) -> list[str]:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.brokers})
        parts = []
        for topic in self.topics:
            meta = admin.list_topics(topic, timeout=30).topics[topic]
            if meta.error is not None:
                raise RuntimeError(f"cannot list partitions of topic {topic!r}: {meta.error.str()}")
            parts += [f"{p}-{topic}" for p in sorted(meta.partitions)]
        return parts

    def build_part(
        self,
        step_id: str,
        for_part: str,
        resume_state: int | None,
        consumer_extra: dict[str, Any] | None = None,
    ) -> KafkaPartition:
        from confluent_kafka import OFFSET_BEGINNING, Consumer

        idx, topic = for_part.split("-", 1)
        if topic not in self.topics:
            raise ValueError(f"recovery state names topic {topic!r}, not one of {self.topics}")
        offset = OFFSET_BEGINNING if resume_state is None else resume_state
        config = {**(self.config or {}), **(consumer_extra or {})}
        consumer = Consumer(consumer_config(self.brokers, self.tail, config))
        return KafkaPartition(
            consumer,
            topic,
            int(idx),
            offset,
            tail=self.tail,
            batch_size=self.batch_size,
            pacing=self.pacing,
        )
