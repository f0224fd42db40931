"""Bytewax's Kafka source, without spinning on an idle topic.

``bytewax.connectors.kafka.KafkaSource`` keeps one librdkafka consumer per partition
fetching all the time and polls it with a 1 ms timeout. Against a broker that honours
``fetch.wait.max.ms`` an idle fetch waits on the broker; the embedded broker answers at
once, so every idle partition's consumer thread loops: measured on this project's 2-core
machine, ~0.25 of a core per partition (the ingest flow reads three) plus the broker's own
share — CPU the windows' work then lacked.

:class:`PacedKafkaSource` reads the same partitions with the same consumer, offsets and
snapshots, and paces only while a partition is idle: after ``idle_grace`` without a message
it pauses the partition (no fetches) and asks Bytewax not to call it for ``idle_poll``; it
then resumes it, gives the fetch ``idle_grace`` to bring anything new, and so on. While
messages keep coming nothing changes (and a bounded read, ``tail=False``, is never paced).
The cost is at most ``idle_poll`` of extra delay on
the first message after a quiet spell (50 ms, against 30 s windows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from bytewax.connectors.kafka import KafkaSource
from bytewax.inputs import StatefulSourcePartition

IDLE_POLL = timedelta(milliseconds=50)
IDLE_GRACE = timedelta(milliseconds=20)


class PacedPartition(StatefulSourcePartition[Any, Any]):
    """Wraps a Kafka source partition (anything with ``next_batch``/``snapshot``/``close``
    and a librdkafka ``consumer`` that can ``pause``/``resume`` its ``assignment()``)."""

    def __init__(
        self,
        inner: StatefulSourcePartition[Any, Any],
        consumer: Any,
        *,
        idle_poll: timedelta = IDLE_POLL,
        idle_grace: timedelta = IDLE_GRACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inner = inner
        self._consumer = consumer
        self._poll_s = idle_poll.total_seconds()
        self._grace_s = idle_grace.total_seconds()
        self._clock = clock
        self._paused = False
        self._fetching_since = clock()  # last message, or last resume
        self._awake: datetime | None = None

    def next_batch(self) -> list[Any]:
        now = self._clock()
        if self._paused:
            self._consumer.resume(self._consumer.assignment())
            self._paused, self._fetching_since = False, now
        batch = self._inner.next_batch()  # StopIteration at the end of a bounded read
        if batch:
            self._fetching_since, self._awake = now, None
        elif now - self._fetching_since >= self._grace_s:
            self._consumer.pause(self._consumer.assignment())
            self._paused = True
            self._awake = datetime.now(UTC) + timedelta(seconds=self._poll_s)
        else:
            self._awake = None
        return batch

    def next_awake(self) -> datetime | None:
        return self._awake

    def snapshot(self) -> Any:
        return self._inner.snapshot()

    def close(self) -> None:
        self._inner.close()


class PacedKafkaSource(KafkaSource):
    """:class:`KafkaSource` whose idle partitions pause fetching (see the module doc).

    Only a tailing source paces: a bounded read (``tail=False``) ends on librdkafka's
    end-of-partition event, which a pause could discard, so it reads as Bytewax does.
    """

    def __init__(
        self,
        brokers: Iterable[str],
        topics: Iterable[str],
        tail: bool = True,
        *,
        idle_poll: timedelta = IDLE_POLL,
        idle_grace: timedelta = IDLE_GRACE,
        **kwargs: Any,
    ) -> None:
        super().__init__(brokers, topics, tail, **kwargs)
        self._pace = tail
        self._idle_poll = idle_poll
        self._idle_grace = idle_grace

    def build_part(self, step_id: str, for_part: str, resume_state: Any) -> Any:
        inner = super().build_part(step_id, for_part, resume_state)
        consumer = getattr(inner, "_consumer", None)  # Bytewax 0.21 keeps it here
        if not self._pace or consumer is None:
            return inner  # read as Bytewax does
        return PacedPartition(
            inner, consumer, idle_poll=self._idle_poll, idle_grace=self._idle_grace
        )
