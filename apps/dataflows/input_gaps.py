"""Lost input, detected: a Kafka partition that no longer holds what the worker's saved
position says it does.

The flow's Kafka source (:mod:`apps.dataflows.kafka_source`) keeps each partition's next
offset in the Bytewax recovery state and, on its own, trusts it. Two things make that
position wrong:
- the log end fell below it: the broker lost records it had acknowledged (an unclean leader
  election; the embedded broker SIGKILLed) and will hand their offsets to new records, which
  the worker would then skip, silently;
- the earliest offset rose above it: retention deleted records the worker had not read.
Each partition here checks its position against the broker's watermarks when it starts (the
resumed position) and every ``CHECK_EVERY_S`` while it runs ("offset out of range" stops
the consumer instead of a silent jump: ``auto.offset.reset=error``); it also re-reads the
record at the last offset it read, which tells a log that lost records and then grew past
the position again (the producers' backlog). On a contradiction it logs the partition and
the offset range lost, counts it in ``worldmm_ingest_input_lost_records_total``, and moves
the position to what the broker holds, so nothing new is skipped.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from bytewax.inputs import StatefulSourcePartition
from confluent_kafka import Consumer, TopicPartition

from apps.dataflows.kafka_source import (
    IdleKafkaSource,
    KafkaPartition,
    SourceRecord,
    consumer_config,
)
from apps.dataflows.metrics import INPUT_LOST

log = logging.getLogger("worldmm.dataflow.input_gaps")

CHECK_EVERY_S = 5.0
WATERMARK_TIMEOUT_S = 5.0

Reason = Literal["log_end_below_position", "earliest_above_position", "offsets_reused"]
SEEN_RECORDS = 4096  # identities of the last records read per partition, to find a reuse


@dataclass(frozen=True)
class InputGap:
    """Offsets ``[first, end)`` of ``topic``/``partition`` that the broker no longer holds;
    reading goes on at ``resume_at``."""

    topic: str
    partition: int
    first: int
    end: int
    resume_at: int
    reason: Reason

    @property
    def records(self) -> int:
        return self.end - self.first


def check_position(
    topic: str, partition: int, position: int, low: int, high: int
) -> InputGap | None:
    """The gap between the worker's next offset ``position`` and the broker's watermarks
    (``low`` = earliest offset held, ``high`` = log end), or None when they agree. A negative
    position is a logical one (beginning/end: nothing saved), which the broker resolves."""
    if position < 0 or low < 0 or high < 0:
        return None
    if position > high:
        # The worker read up to ``position``; the broker now ends before it and will give
        # offsets high.. to new records: read them from there.
        return InputGap(topic, partition, high, position, high, "log_end_below_position")
    if position < low:
        return InputGap(topic, partition, position, low, low, "earliest_above_position")
    return None


def report(gap: InputGap) -> None:
    """Say it where an operator looks: the log and the metric."""
    log.error(
        "input_lost topic=%s partition=%d offsets=[%d, %d) records=%d reason=%s resume_at=%d",
        gap.topic,
        gap.partition,
        gap.first,
        gap.end,
        gap.records,
        gap.reason,
        gap.resume_at,
    )
    INPUT_LOST.labels(gap.topic, str(gap.partition), gap.reason).inc(gap.records)


class _CheckedPartition(StatefulSourcePartition[SourceRecord, int]):
    """A :class:`KafkaPartition` whose position is checked against what the broker holds."""

    def __init__(
        self,
        inner: KafkaPartition,
        on_gap: Callable[[InputGap], None],
        clock: Callable[[], float],
        probe: Callable[[], Consumer],
    ) -> None:
        self._inner = inner
        self._tp = (inner.topic, inner.partition)
        self._on_gap = on_gap
        self._clock = clock
        self._next_check = 0.0
        self._seen: deque[tuple[int, int]] = deque(maxlen=SEEN_RECORDS)  # (offset, identity)
        self._make_probe = probe
        self._probe: Consumer | None = None
        self.check()

    def check(self) -> InputGap | None:
        """Compare the position with what the broker holds now; rewind on a gap."""
        self._next_check = self._clock() + CHECK_EVERY_S
        position = self._inner.offset
        if position < 0:
            return None
        try:
            low, high = self._inner.consumer.get_watermark_offsets(
                TopicPartition(*self._tp), timeout=WATERMARK_TIMEOUT_S, cached=False
            )
        except Exception as exc:  # noqa: BLE001 - a broker down now is checked next time
            log.debug("watermarks of %s/%d not read: %s", *self._tp, exc)
            return None
        gap = check_position(*self._tp, position, low, high) or self._reused(position)
        if gap is not None:
            self._rewind(gap.resume_at)
            while self._seen and self._seen[-1][0] >= gap.resume_at:
                self._seen.pop()
            self._on_gap(gap)
        return gap

    def _reused(self, position: int) -> InputGap | None:
        """A log end that fell and then rose past the position again (the producers sent
        their backlog at once) shows nothing in the watermarks: the records at the offsets
        just read are then other records. Find the first offset whose record changed (the
        log is the same up to where the broker lost it, other from there on)."""
        if not self._seen or self._same(*self._seen[-1]):
            return None
        seen = list(self._seen)
        lo, hi = 0, len(seen) - 1  # seen[hi] changed; find the first changed one
        while lo < hi:
            mid = (lo + hi) // 2
            if self._same(*seen[mid]):
                lo = mid + 1
            else:
                hi = mid
        first = seen[lo][0]
        return InputGap(*self._tp, first, position, first, "offsets_reused")

    def _same(self, offset: int, identity: int) -> bool:
        """Whether the broker still holds the record read at ``offset`` (True when it cannot
        say now: a broker down is checked again next time)."""
        if self._probe is None:
            self._probe = self._make_probe()
        self._probe.assign([TopicPartition(*self._tp, offset)])
        try:
            msgs = self._probe.consume(1, WATERMARK_TIMEOUT_S)
        finally:
            # an assigned consumer keeps fetching in the background: left assigned, each
            # probe spins against the broker while the flow idles (its partition parked)
            self._probe.unassign()
        if not msgs or msgs[0].error() is not None:
            return True
        m = msgs[0]
        return m.offset() != offset or _identity(m.key(), m.value(), m.headers()) == identity

    def _rewind(self, offset: int) -> None:
        # The partition reads on from its ``offset`` (and the next snapshot saves it); a
        # parked one is assigned there when its probe finds records.
        self._inner.offset = offset
        if not self._inner.pacer.parked:
            self._inner.consumer.assign([TopicPartition(*self._tp, offset)])

    def next_batch(self) -> list[SourceRecord]:
        if self._clock() >= self._next_check:
            self.check()
        batch = self._inner.next_batch()
        for r in batch:
            self._seen.append((r.offset, _identity(r.key, r.value, r.headers)))
        return batch

    def next_awake(self) -> datetime | None:
        return self._inner.next_awake()

    def snapshot(self) -> int:
        return self._inner.snapshot()

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
        self._inner.close()


def _identity(key: bytes | None, value: bytes | None, headers: Any) -> int:
    """A record's identity: its key, value and headers."""
    return zlib.crc32(b"%r\0%r\0%r" % (key, value, list(headers or [])))


class CheckedKafkaSource(IdleKafkaSource):
    """The flow's Kafka source, its partitions detecting and reporting lost input (module
    docstring)."""

    def __init__(
        self,
        brokers: str,
        topics: list[str],
        *,
        on_gap: Callable[[InputGap], None] = report,
        clock: Callable[[], float] = time.monotonic,
        config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        config = {"auto.offset.reset": "error", **(config or {})}
        super().__init__(brokers, topics, config=config, **kwargs)
        self._on_gap = on_gap
        self._clock = clock

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> _CheckedPartition:
        inner = super().build_part(step_id, for_part, resume_state)
        config = consumer_config(self.brokers, True, self.config)
        return _CheckedPartition(inner, self._on_gap, self._clock, lambda: Consumer(config))
