"""The paced Kafka source: an idle partition stops fetching, a busy one is read as before.

Without it every idle partition's consumer thread spins against the embedded broker (which
answers fetches at once), and the worker burns most of a core doing nothing.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from dataflows.kafka_source import PacedPartition


class FakeConsumer:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def assignment(self) -> list[str]:
        return ["tp0"]

    def pause(self, parts) -> None:
        self.calls.append(f"pause {parts}")

    def resume(self, parts) -> None:
        self.calls.append(f"resume {parts}")


class FakePartition:
    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches
        self.polls = 0

    def next_batch(self) -> list[str]:
        self.polls += 1
        return self.batches.pop(0)

    def snapshot(self) -> int:
        return 42

    def close(self) -> None:
        pass


def test_idle_partition_pauses_then_resumes_and_reads() -> None:
    now = [0.0]
    consumer = FakeConsumer()
    inner = FakePartition([["m1"], [], [], ["m2"], ["m3"]])
    part = PacedPartition(
        inner,
        consumer,
        idle_poll=timedelta(milliseconds=50),
        idle_grace=timedelta(milliseconds=20),
        clock=lambda: now[0],
    )
    assert part.next_batch() == ["m1"] and part.next_awake() is None
    now[0] = 0.010
    assert part.next_batch() == [] and part.next_awake() is None  # within the grace: keep going
    assert consumer.calls == []
    now[0] = 0.030
    assert part.next_batch() == []
    assert consumer.calls == ["pause ['tp0']"] and part.next_awake() is not None
    now[0] = 0.085  # Bytewax calls again after next_awake
    assert part.next_batch() == ["m2"]
    assert consumer.calls == ["pause ['tp0']", "resume ['tp0']"] and part.next_awake() is None
    assert part.next_batch() == ["m3"] and len(consumer.calls) == 2  # busy: never paused
    assert part.snapshot() == 42 and inner.polls == 5


@pytest.mark.integration
def test_idle_tailing_worker_uses_little_cpu(settings, tmp_path: Path) -> None:
    """A real ingest worker (tailing three topics) that has read a message and then idles."""
    from bench.ingest import Worker, _wait_sessions
    from connectors.gateway import GlassesProducer
    from connectors.topics import create_topics

    create_topics(settings.kafka_brokers, settings)
    worker = Worker(settings, latency_s=0.0, workdir=tmp_path)
    try:
        user = f"idle-{tmp_path.name[-10:]}"
        with GlassesProducer(settings) as producer:
            from datetime import UTC, datetime

            producer.start_session(user, "s1", datetime.now(UTC))
        _wait_sessions(settings, [user], worker, timeout_s=120)  # it reads through the source
        cpu0, t0 = worker.cpu_s(), time.monotonic()
        time.sleep(4)  # measuring an idle period: nothing to wait for
        rate = (worker.cpu_s() - cpu0) / (time.monotonic() - t0)
    finally:
        worker.stop()
    # Bytewax's own source spins at ~0.6-0.85 core here; paced, a few hundredths.
    assert rate < 0.25, rate
