"""Lost input, detected: a Kafka partition that no longer holds what the worker's saved
position says it does (the broker lost acknowledged records, or retention deleted unread ones).

Bytewax's Kafka source trusts its saved offsets, so such records would be skipped silently.
Each partition checks its position against the broker, and a contradiction is logged,
counted and recorded per wearer who may have lost input, so their windows read "input may be
missing". How and why: docs/architecture.md ("Delivery and recovery").
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from bytewax.inputs import StatefulSourcePartition
from confluent_kafka import Consumer, KafkaError, TopicPartition

from dataflows.ingest_metrics import INPUT_LOST
from dataflows.kafka_source import (
    IdleKafkaSource,
    KafkaPartition,
    SourceRecord,
    consumer_config,
)
from worldmm.store.db import Database
from worldmm.store.input_gaps import InputGapSpan, known_users, record_gap
from worldmm.store.outage import retry_while_down

log = logging.getLogger("worldmm.dataflow.input_gaps")

CHECK_EVERY_S = 5.0
WATERMARK_TIMEOUT_S = 5.0

Reason = Literal["log_end_below_position", "earliest_above_position", "offsets_reused"]
SEEN_RECORDS = 4096  # identities of the last records read per partition, to find a reuse
Role = Literal["before", "lost", "after"]


@dataclass(frozen=True)
class Neighbour:
    """A record beside a gap: the one just before it, a lost one this worker had read, or
    the first one the broker holds after it (produced after the lost ones)."""

    role: Role
    offset: int
    user_id: str | None
    ts_ms: int | None  # capture time (the ``ts`` header), else the broker's timestamp


@dataclass(frozen=True)
class InputGap:
    """Offsets ``[first, end)`` of ``topic``/``partition`` that the broker no longer holds;
    reading goes on at ``resume_at``. ``neighbours`` and ``users`` (the wearers this
    partition has read) say whose and when (:func:`span_of`); ``partitions`` is the topic's
    partition count (0: not known)."""

    topic: str
    partition: int
    first: int
    end: int
    resume_at: int
    reason: Reason
    neighbours: tuple[Neighbour, ...] = field(default=(), compare=False)
    users: frozenset[str] = field(default=frozenset(), compare=False)
    partitions: int = field(default=0, compare=False)

    @property
    def records(self) -> int:
        return self.end - self.first


def span_of(gap: InputGap, detected_ms: int, pad_ms: int) -> tuple[int | None, int]:
    """The capture times ``[start, end]`` (epoch ms) the lost records lie in, by their
    neighbours: from the earliest neighbour (None, unbounded, when nothing before the gap
    is known) to the latest, widened by ``pad_ms`` on both sides (records of different
    wearers interleave on a partition out of capture order by up to the flow's allowed
    lateness). With no record after the gap known and not every lost one read, the lost
    ones were captured at the latest when the gap was found: ``detected_ms``."""
    times = [n.ts_ms for n in gap.neighbours if n.ts_ms is not None]
    roles = {n.role for n in gap.neighbours if n.ts_ms is not None}
    read = {n.offset for n in gap.neighbours if n.role == "lost"}
    start = min(times) - pad_ms if times and roles & {"before", "lost"} else None
    all_read = read >= set(range(gap.first, gap.end))
    if times and ("after" in roles or all_read):
        return start, max(times) + pad_ms
    return start, max([detected_ms, *(t + pad_ms for t in times)])


def partition_of(key: bytes, partitions: int) -> int:
    """The partition librdkafka's default partitioner (``consistent_random``) gives a keyed
    record: CRC-32 of the key modulo the partition count (every producer here keys by user)."""
    return zlib.crc32(key) % partitions


def users_of(gap: InputGap, known: Iterable[str]) -> set[str]:
    """The wearers whose records go to the gap's partition: those its neighbours and this
    worker's reads name, and every ``known`` wearer the partitioner sends there."""
    users = {n.user_id for n in gap.neighbours if n.user_id} | set(gap.users)
    if gap.partitions > 0:
        users |= {u for u in known if partition_of(u.encode(), gap.partitions) == gap.partition}
    return users


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


class GapRecorder:
    """The flow's ``on_gap``: :func:`report` the gap, then store it for every wearer whose
    records go to its partition, over the span its neighbours give (module docstring)."""

    def __init__(
        self,
        database: Callable[[], Database],
        pad_ms: int,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._database = database
        self._pad_ms = pad_ms
        self._now_ms = now_ms

    def __call__(self, gap: InputGap) -> None:
        report(gap)
        start, end = span_of(gap, self._now_ms(), self._pad_ms)
        span = InputGapSpan(
            gap.topic,
            gap.partition,
            gap.first,
            gap.end,
            gap.reason,
            _dt(start) if start is not None else None,
            _dt(end),
        )
        try:
            # a database outage holds the input here until the server is back
            rows = retry_while_down(lambda: self._store(gap, span), what="input gap")
        except Exception:  # noqa: BLE001 - the log line and the metric above still tell
            log.exception("input_gap_not_stored topic=%s partition=%d", gap.topic, gap.partition)
            return
        log.warning(
            "input_gap_marked topic=%s partition=%d offsets=[%d, %d) users=%d span=[%s, %s]",
            gap.topic,
            gap.partition,
            gap.first,
            gap.end,
            rows,
            span.span_start.isoformat() if span.span_start else "-",
            span.span_end.isoformat(),
        )

    def _store(self, gap: InputGap, span: InputGapSpan) -> int:
        with self._database().connection() as conn:
            users = users_of(gap, known_users(conn) if gap.partitions else ())
            return record_gap(conn, users, span)


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


class _Outage:
    """Set by the partition consumer's error callback when it lost the broker: a broker that
    comes back may have lost records the partition read and reused their offsets."""

    def __init__(self) -> None:
        self.seen = False

    def note(self, err: Any) -> None:
        if err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            self.seen = True


class _CheckedPartition(StatefulSourcePartition[SourceRecord, int]):
    """A :class:`KafkaPartition` whose position is checked against what the broker holds."""

    def __init__(
        self,
        inner: KafkaPartition,
        on_gap: Callable[[InputGap], None],
        clock: Callable[[], float],
        probe: Callable[[], Consumer],
        outage: _Outage | None = None,
    ) -> None:
        self._inner = inner
        self._outage = outage or _Outage()
        self._tp = (inner.topic, inner.partition)
        self._on_gap = on_gap
        self._clock = clock
        self._next_check = 0.0
        self._seen: deque[_Seen] = deque(maxlen=SEEN_RECORDS)
        self._users: set[str] = set()  # every wearer this partition has read
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
            gap = self._described(gap)
            self._rewind(gap.resume_at)
            while self._seen and self._seen[-1].offset >= gap.resume_at:
                self._seen.pop()
            self._on_gap(gap)
        return gap

    def _described(self, gap: InputGap) -> InputGap:
        """The gap with its neighbours, the wearers read here and the partition count."""
        seen = {r.offset: r for r in self._seen}
        lost = [
            Neighbour("lost", o, r.user_id, r.ts_ms)
            for o, r in seen.items()
            if gap.first <= o < gap.end
        ]
        before = seen.get(gap.first - 1)
        found = [
            Neighbour("before", before.offset, before.user_id, before.ts_ms)
            if before is not None
            else self._held("before", gap.first - 1),
            *lost,
            # a log that ended below the position holds nothing after the gap yet
            None if gap.reason == "log_end_below_position" else self._held("after", gap.resume_at),
        ]
        neighbours = tuple(n for n in found if n is not None)
        try:
            meta = self._inner.consumer.list_topics(gap.topic, timeout=WATERMARK_TIMEOUT_S)
            partitions = len(meta.topics[gap.topic].partitions)
        except Exception as exc:  # noqa: BLE001 - the read wearers and neighbours still say
            log.debug("partitions of %s not read: %s", gap.topic, exc)
            partitions = 0
        return replace(
            gap, neighbours=neighbours, users=frozenset(self._users), partitions=partitions
        )

    def _held(self, role: Role, offset: int) -> Neighbour | None:
        """The record the broker holds at ``offset`` now, as a neighbour (None: none)."""
        m = self._fetch(offset) if offset >= 0 else None
        if m is None or m.offset() != offset:
            return None
        rec = _Seen.of(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1])
        return Neighbour(role, rec.offset, rec.user_id, rec.ts_ms)

    def _reused(self, position: int) -> InputGap | None:
        """A log end that fell and then rose past the position again (the producers sent
        their backlog at once) shows nothing in the watermarks: the records at the offsets
        read are then other records. After the consumer lost the broker, every record read
        is compared (the partition may have read on, at new offsets, past the reused ones
        before this check: the newest record then still agrees); otherwise the newest one,
        and on a change the first changed offset is found by bisection (the log is the same
        up to where the broker lost it, other from there on)."""
        if not self._seen:
            return None
        if self._outage.seen:
            return self._reused_since_outage(position)
        if self._same(self._seen[-1]):
            return None
        seen = list(self._seen)
        lo, hi = 0, len(seen) - 1  # seen[hi] changed; find the first changed one
        while lo < hi:
            mid = (lo + hi) // 2
            if self._same(seen[mid]):
                lo = mid + 1
            else:
                hi = mid
        first = seen[lo].offset
        return InputGap(*self._tp, first, position, first, "offsets_reused")

    def _reused_since_outage(self, position: int) -> InputGap | None:
        """Every remembered record against what the broker holds at its offset now, in one
        sequential read; the first run of changed offsets is the gap. The suspicion stays
        until the broker answers."""
        seen = list(self._seen)
        held = self._fetch_run(seen[0].offset, seen[-1].offset)
        if held is None:
            return None  # the broker is not back yet: checked again next time
        self._outage.seen = False
        changed = [r.offset for r in seen if r.offset in held and held[r.offset] != r.identity]
        if not changed:
            return None
        first = changed[0]
        after = [r.offset for r in seen if r.offset > first and held.get(r.offset) == r.identity]
        return InputGap(*self._tp, first, after[0] if after else position, first, "offsets_reused")

    def _fetch_run(self, first: int, last: int) -> dict[int, int] | None:
        """Identities of the records at offsets ``first``..``last`` the broker holds now
        (None when it does not answer)."""
        if self._probe is None:
            self._probe = self._make_probe()
        self._probe.assign([TopicPartition(*self._tp, first)])
        got: dict[int, int] = {}
        try:
            while True:
                msgs = self._probe.consume(500, WATERMARK_TIMEOUT_S)
                ok = [m for m in msgs if m.error() is None]
                if not ok:
                    break
                for m in ok:
                    got[m.offset()] = _identity(m.key(), m.value(), m.headers())
                if ok[-1].offset() >= last:
                    break
        finally:
            self._probe.unassign()
        return got or None

    def _same(self, rec: _Seen) -> bool:
        """Whether the broker still holds the record read at ``rec.offset`` (True when it
        cannot say now: a broker down is checked again next time)."""
        m = self._fetch(rec.offset)
        if m is None:
            return True
        return m.offset() != rec.offset or (
            _identity(m.key(), m.value(), m.headers()) == rec.identity
        )

    def _fetch(self, offset: int) -> Any | None:
        """The record at (or, when that is gone, after) ``offset``, or None."""
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
            return None
        return msgs[0]

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
            rec = _Seen.of(r.offset, r.key, r.value, r.headers)
            self._seen.append(rec)
            if rec.user_id:
                self._users.add(rec.user_id)
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
    """A record's identity: a CRC-32 of its key, value and headers. The key and value are
    run over as bytes (every record read comes here: formatting an 80 kB audio chunk with
    ``%r`` first cost more CPU than anything else the worker did with it); the lengths come
    first, so bytes cannot move between the parts unnoticed, and None is not b""."""
    sizes = [-1 if b is None else len(b) for b in (key, value)]
    crc = zlib.crc32(b"%d,%d,%r\0" % (*sizes, list(headers or [])))
    return zlib.crc32(value or b"", zlib.crc32(key or b"", crc))


@dataclass(frozen=True)
class _Seen:
    """What a partition remembers of a record it read (or probed)."""

    offset: int
    identity: int
    user_id: str | None
    ts_ms: int | None

    @classmethod
    def of(
        cls,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        broker_ts_ms: int | None = None,
    ) -> _Seen:
        ts = next((v for k, v in headers or [] if k == "ts"), None)
        broker = broker_ts_ms if broker_ts_ms is not None and broker_ts_ms > 0 else None
        try:
            ts_ms = int(ts) if ts is not None else broker
        except ValueError:  # an invalid record (the flow sends it to the DLQ)
            ts_ms = broker
        user = key.decode("utf-8", "replace") if key else None
        return cls(offset, _identity(key, value, headers), user, ts_ms)


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
        outage = _Outage()
        inner = super().build_part(
            step_id, for_part, resume_state, consumer_extra={"error_cb": outage.note}
        )
        config = consumer_config(self.brokers, True, self.config)
        return _CheckedPartition(inner, self._on_gap, self._clock, lambda: Consumer(config), outage)
