"""The paced Kafka input's partition states, on a fake clock: a partition that brings nothing
for the grace period parks (stops fetching), and so does one whose records stopped for the
shorter idle time; a parked one looks at the broker's high watermark ever less often up to a
cap, and records bring it back to reading."""

from __future__ import annotations

from dataflows.kafka_source import Pacer, Pacing, consumer_config

PACING = Pacing(grace_s=0.1, idle_s=0.02, first_s=0.01, max_s=0.25, poll_s=0.002)


def test_reading_parks_after_the_grace_without_records() -> None:
    p = Pacer(PACING, now=0.0)
    assert not p.should_park(0.05) and p.wake(0.05) == PACING.poll_s
    assert p.should_park(0.1)
    p.park(0.1)
    assert p.parked and not p.should_park(1.0)


def test_once_records_came_a_burst_ends_after_the_idle_time_not_the_grace() -> None:
    # assigned and caught up, the consumer fetches in a loop: the grace after each burst was
    # most of the worker's Kafka client CPU (a 100 ms spin per burst)
    p = Pacer(PACING, now=0.0)
    p.records(0.05)
    assert not p.should_park(0.06)
    p.records(0.06)  # the burst goes on
    assert not p.should_park(0.079)
    assert p.should_park(0.08)
    p.park(0.08)
    p.unpark(0.5)  # re-assigned: its first records get the whole grace again
    assert not p.should_park(0.55) and p.should_park(0.61)


def test_a_parked_partition_probes_less_often_up_to_the_cap() -> None:
    p = Pacer(PACING, now=0.0)
    p.park(0.0)
    assert not p.probe_due(0.005) and round(p.wake(0.005), 6) == 0.005
    now, gaps = 0.0, []
    for _ in range(8):
        now = p.next_probe
        assert p.probe_due(now)
        p.nothing_new(now)
        gaps.append(round(p.next_probe - now, 6))
    assert gaps == [0.02, 0.04, 0.08, 0.16, 0.25, 0.25, 0.25, 0.25]
    # a probe that finds records: reading again, the grace counted from the re-assign
    p.unpark(now)
    assert not p.parked and p.interval == PACING.max_s
    p.records(now)
    assert p.interval == PACING.first_s and not p.should_park(now + 0.01)


def test_consumer_config_batches_fetches_and_commits_nothing() -> None:
    live = consumer_config("127.0.0.1:9092", tail=True)
    assert live["enable.auto.commit"] is False and live["enable.partition.eof"] is False
    assert live["queued.min.messages"] == 1 and live["fetch.queue.backoff.ms"] > 0
    assert consumer_config("b:1", tail=False)["enable.partition.eof"] is True
    assert (
        consumer_config("b:1", tail=True, extra={"fetch.wait.max.ms": 5})["fetch.wait.max.ms"] == 5
    )
