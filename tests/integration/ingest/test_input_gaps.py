"""Lost input detected (#24 part 4), against the embedded broker: a saved position past the
partition's log end (the broker lost acknowledged records and reuses their offsets) is
reported with its offset range and rewound, so the new records at those offsets are read,
not skipped; a position the broker agrees with is left alone."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dataflows.input_gaps import CheckedKafkaSource, InputGap, check_position
from tests.fixtures.processes import wait_for

pytestmark = pytest.mark.integration


def _topic(brokers: str, records: int) -> str:
    name = f"gaps-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": brokers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    _produce(brokers, name, range(records))
    return name


def _produce(brokers: str, topic: str, values) -> None:
    producer = Producer({"bootstrap.servers": brokers})
    for v in values:
        producer.produce(topic, value=str(v).encode(), partition=0)
    assert producer.flush(30) == 0


def _read(part, want: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []

    def more() -> bool:  # the source never blocks: polled until the records are there
        got.extend((m.offset, m.value) for m in part.next_batch())
        return len(got) >= want

    wait_for(more, 60, f"{want} records", poll_s=0.01)
    return got


@contextmanager
def _partition(brokers: str, topic: str, resume_state: int | None) -> Iterator[tuple]:
    """Partition 0 of ``topic`` resumed at ``resume_state``, and the gaps it reports."""
    gaps: list[InputGap] = []
    source = CheckedKafkaSource(brokers, [topic], on_gap=gaps.append)
    part = source.build_part("kafka_in", f"0-{topic}", resume_state=resume_state)
    try:
        yield part, gaps
    finally:
        part.close()


def test_a_position_past_the_log_end_is_reported_and_rewound(settings) -> None:
    topic = _topic(settings.kafka_brokers, 10)
    with _partition(settings.kafka_brokers, topic, 50) as (part, gaps):
        assert gaps == [InputGap(topic, 0, 10, 50, 10, "log_end_below_position")]
        assert gaps[0].records == 40 and part.snapshot() == 10
        _produce(settings.kafka_brokers, topic, ["new-a", "new-b"])
        assert _read(part, 2) == [(10, b"new-a"), (11, b"new-b")]  # not skipped
        assert part.check() is None and len(gaps) == 1  # the position now agrees


def test_an_agreeing_position_reads_on_without_a_report(settings) -> None:
    topic = _topic(settings.kafka_brokers, 10)
    with _partition(settings.kafka_brokers, topic, 7) as (part, gaps):
        assert [o for o, _ in _read(part, 3)] == [7, 8, 9]
        assert gaps == [] and part.snapshot() == 10


def test_offsets_reused_by_other_records_are_found_and_read(settings) -> None:
    """The chaos run's case: the broker lost records the worker had read, and its log end was
    past the worker's position again (the producers' backlog) before the worker looked. The
    watermarks agree; the records at the offsets read do not."""
    brokers = settings.kafka_brokers
    topic = _topic(brokers, 10)
    with _partition(brokers, topic, None) as (part, gaps):
        assert [o for o, _ in _read(part, 10)] == list(range(10))
        admin = AdminClient({"bootstrap.servers": brokers})
        admin.delete_topics([topic])[topic].result(timeout=30)
        for _ in range(100):  # the topic comes back empty: its offsets start again at 0
            try:
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
                break
            except Exception:  # noqa: BLE001 - still being deleted
                time.sleep(0.2)
        _produce(brokers, topic, [f"other-{i}" for i in range(12)])
        # (the first checks may find the recreated topic's leader not known yet: retried)
        gap = wait_for(part.check, 60, "the reused offsets found", poll_s=0.2)
        assert gap == InputGap(topic, 0, 0, 10, 0, "offsets_reused") and gaps == [gap]
        got = _read(part, 12)
        assert got == [(i, f"other-{i}".encode()) for i in range(12)]  # none skipped
        assert part.check() is None and len(gaps) == 1


def _recreate(brokers: str, topic: str) -> None:
    """The topic deleted and made again, empty: its offsets start again at 0."""
    admin = AdminClient({"bootstrap.servers": brokers})
    admin.delete_topics([topic])[topic].result(timeout=30)
    for _ in range(100):
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
            return
        except Exception:  # noqa: BLE001 - still being deleted
            time.sleep(0.2)


def test_reused_offsets_are_found_after_reading_on_past_them(tmp_path) -> None:
    """The full chaos run's case: the broker went away, came back without records the
    partition had read, gave their offsets to new records, and the partition read on past
    them (the records after its position agree) before it checked. Comparing only the newest
    record finds nothing; after an outage every remembered record is compared."""
    from deploy.stack import kafka as kafka_stack

    root = tmp_path / "broker"
    broker = kafka_stack.start(root)
    brokers = broker["brokers"]
    try:
        topic = _topic(brokers, 10)
        with _partition(brokers, topic, None) as (part, gaps):
            assert [o for o, _ in _read(part, 10)] == list(range(10))
            kafka_stack.stop(root)
            wait_for(lambda: part.next_batch() == [] and part._outage.seen, 60, "the outage seen")
            kafka_stack.start(root, port=broker["port"])
            _recreate(brokers, topic)
            _produce(brokers, topic, [f"other-{i}" for i in range(12)])
            # read on past the reused offsets: offsets 10 and 11 are new, and agree
            assert _read(part, 2) == [(10, b"other-10"), (11, b"other-11")]
            gap = wait_for(part.check, 60, "the reused offsets found", poll_s=0.2)
            assert gap == InputGap(topic, 0, 0, 10, 0, "offsets_reused") and gaps == [gap]
            got = _read(part, 12)  # read again from 0: none of the new records skipped
            assert got == [(i, f"other-{i}".encode()) for i in range(12)]
            assert part.check() is None and len(gaps) == 1
    finally:
        kafka_stack.stop(root)


@pytest.mark.parametrize(
    ("position", "low", "high", "gap"),
    [
        (5, 0, 10, None),
        (10, 0, 10, None),  # at the end: the next record is yet to come
        (-2, 0, 10, None),  # OFFSET_BEGINNING: nothing saved
        (12, 0, 10, (10, 12, 10, "log_end_below_position")),
        (3, 6, 10, (3, 6, 6, "earliest_above_position")),
        (3, 6, 6, (3, 6, 6, "earliest_above_position")),  # all deleted, nothing new yet
    ],
)
def test_check_position(position, low, high, gap) -> None:
    found = check_position("t", 0, position, low, high)
    assert (
        None if found is None else (found.first, found.end, found.resume_at, found.reason)
    ) == gap
