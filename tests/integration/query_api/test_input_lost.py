"""Lost input marks its windows (#24 part 4), against the embedded broker and the API: the
broker ends a partition below the worker's saved position (it lost records it had
acknowledged); the record before the gap and the moment it was found give a span of capture
time, the partition gives the wearers (the record's key, the producer's partitioner for
wearers the worker never read); their windows overlapping the span read "input may be
missing" in the segments API, windows built after the gap included, and no other window
does."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dataflows.input_gaps import CheckedKafkaSource, GapRecorder, partition_of
from tests.fixtures.wearers import seed_segment
from worldmm.store.input_gaps import list_gaps, marked_windows

pytestmark = pytest.mark.integration

BASE = datetime(2024, 3, 3, 9, 0, tzinfo=UTC)  # apart from other tests' windows
PARTITIONS = 4


def _ms(s: float) -> int:
    return int((BASE + timedelta(seconds=s)).timestamp() * 1000)


def _wearers(make_user):
    """Two wearers whose records go to one partition and one whose go to another."""
    users = [make_user() for _ in range(3)]
    part = partition_of(users[0].user_id.encode(), PARTITIONS)
    while partition_of(users[1].user_id.encode(), PARTITIONS) != part:
        users[1] = make_user()
    while partition_of(users[2].user_id.encode(), PARTITIONS) == part:
        users[2] = make_user()
    return part, *users


def _produce_keyed(brokers: str, topic: str, user_id: str, times_s: list[int]) -> set[int]:
    """Captures of ``user_id`` (keyed by it, partitioned by the producer); their partitions."""
    producer = Producer({"bootstrap.servers": brokers})
    parts: set[int] = set()
    for t in times_s:
        producer.produce(
            topic,
            key=user_id.encode(),
            value=b"jpeg",
            headers=[("user_id", user_id.encode()), ("ts", str(_ms(t)).encode())],
            on_delivery=lambda err, msg: parts.add(msg.partition()),
        )
    assert producer.flush(30) == 0
    return parts


def _marked(client, user) -> dict[tuple[int, int], list[dict]]:
    """(scale, start second) → the segment's ``input_lost``."""
    page = client.get(
        f"/v1/users/{user.user_id}/segments", params={"limit": 100}, headers=user.headers
    ).json()
    return {
        (s["scale"], round((datetime.fromisoformat(s["start"]) - BASE).total_seconds())): s[
            "input_lost"
        ]
        for s in page["items"]
    }


def test_lost_input_marks_the_windows_of_its_partitions_wearers_over_its_span(
    client, api_deps, api_settings, make_user
) -> None:
    brokers = api_settings.kafka_brokers
    part, a, c, b = _wearers(make_user)
    topic = f"lost-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": brokers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    # a's captures every 10 s up to 50 s: offsets 0..5 of a's partition (the partitioner
    # puts them where partition_of says); b's on another partition
    assert _produce_keyed(brokers, topic, a.user_id, [0, 10, 20, 30, 40, 50]) == {part}
    assert _produce_keyed(brokers, topic, b.user_id, [0, 30, 60, 90]) != {part}
    for u in (a, b, c):  # windows built before the gap is found
        for s in range(0, 300, 30):
            if s != 90:
                seed_segment(api_deps, u.user_id, BASE + timedelta(seconds=s), f"{s}")
        seed_segment(api_deps, u.user_id, BASE, "the hour", scale=3600)

    # The worker saved position 9: it had read offsets 6..8, which the broker lost. It finds
    # the gap at restart, 100 s after BASE on its clock.
    recorder = GapRecorder(lambda: api_deps.db, pad_ms=10_000, now_ms=lambda: _ms(100))
    source = CheckedKafkaSource(brokers, [topic], on_gap=recorder)
    source.build_part("kafka_in", f"{part}-{topic}", resume_state=9).close()

    with api_deps.db.connection() as conn:
        (gap,) = list_gaps(conn, a.user_id)
        assert list_gaps(conn, c.user_id) == [gap]  # never read: known by the partitioner
        assert list_gaps(conn, b.user_id) == []
        # the record before the gap (a's at 50 s) less the pad, to the moment it was found
        assert (gap.first_offset, gap.end_offset, gap.reason) == (6, 9, "log_end_below_position")
        assert (gap.span_start, gap.span_end) == (
            BASE + timedelta(seconds=40),
            BASE + timedelta(seconds=100),
        )
    for u in (a, b, c):  # a window built after the gap was found is marked as well
        seed_segment(api_deps, u.user_id, BASE + timedelta(seconds=90), "90")

    for u in (a, c):
        marks = _marked(client, u)
        assert {k for k, v in marks.items() if v} == {(30, 30), (30, 60), (30, 90), (3600, 0)}
        (shown,) = marks[(30, 60)]
        assert shown["records"] == 3 and shown["partition"] == part and shown["topic"] == topic
        one = client.get(
            f"/v1/users/{u.user_id}/segments", params={"scale": 30, "limit": 1}, headers=u.headers
        ).json()["items"][0]
        single = client.get(f"/v1/users/{u.user_id}/segments/{one['id']}", headers=u.headers)
        assert single.json()["input_lost"] == []  # the window at 0 s ends before the span
    assert not any(_marked(client, b).values())
    with api_deps.db.connection() as conn:
        assert marked_windows(conn, [a.user_id, b.user_id, c.user_id]) == 6
