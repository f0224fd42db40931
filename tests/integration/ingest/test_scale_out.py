"""Two Bytewax processes (``worldmm dataflow -i 0/1 -a ...``) over a 4-partition topic with
several users build the same memory as one process does from the same input."""

from __future__ import annotations

import socket
import zlib

import pytest

from tests.fixtures.ingest_runs import fed_settings, session_frames
from tests.fixtures.processes import worldmm
from tests.fixtures.store_reads import memory_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 4


def _users(prefix: str, n: int) -> list[str]:
    """User ids whose Kafka partitions (librdkafka: CRC32 of the key) all differ."""
    out: list[str] = []
    seen: set[int] = set()
    k = 0
    while len(out) < n:
        name = f"{prefix}-{k}"
        part = zlib.crc32(name.encode()) % PARTITIONS
        if part not in seen:
            out.append(name)
            seen.add(part)
        k += 1
    return out


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_two_processes_build_what_one_process_builds(settings, user_id, tmp_path) -> None:
    from bytewax.testing import run_main

    from connectors import kafka_io
    from connectors.topics import topic_names
    from dataflows.ingest import build_flow

    frames = session_frames(tmp_path / "session", 1)
    singles, clustered = _users(f"{user_id}-a", 3), _users(f"{user_id}-b", 3)
    one = fed_settings(settings, singles, frames, topic_partitions=PARTITIONS)
    two = fed_settings(
        settings,
        clustered,
        frames,
        topic_partitions=PARTITIONS,
        topic_prefix=settings.topic_prefix + "c.",
    )
    records = kafka_io.consume_all(two.kafka_brokers, topic_names(two)["frames"])
    assert len({r.partition for r in records}) == 3  # the users are spread over partitions

    run_main(build_flow(one, tail=False))

    ports = _free_ports(2)
    addresses = ";".join(f"127.0.0.1:{p}" for p in ports)
    procs = [
        worldmm(
            ["dataflow", "--to-end", "--no-recovery", "-i", str(i), "-a", addresses],
            two,
            tmp_path / f"proc{i}.log",
        )
        for i in range(2)
    ]
    for i, p in enumerate(procs):
        assert p.wait(timeout=300) == 0, (tmp_path / f"proc{i}.log").read_text()[-3000:]

    for a, b in zip(singles, clustered, strict=True):
        expected = memory_rows(one.database_url, a)
        assert [s[0] for s in expected["segments"]] == [30, 30, 180, 600, 3600]
        assert memory_rows(two.database_url, b) == expected
    logs = [(tmp_path / f"proc{i}.log").read_text() for i in range(2)]
    assert sum(log.count("window_complete") for log in logs) == 3 * 5
