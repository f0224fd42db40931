"""``worldmm dataflow`` against the embedded stack: bounded run with a recovery dir."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.integration


def test_dataflow_command_runs_to_the_end_with_recovery(settings, tmp_path, monkeypatch) -> None:
    from apps.cli import app
    from connectors import codec, kafka_io
    from connectors.topics import create_topics, topic_names
    from tests.fixtures.kafka import produce_and_flush

    create_topics(settings.kafka_brokers, settings)
    # only malformed input: the flow must route it to the DLQ and never load a model
    key, _v, headers = codec.encode_frame("cli-user", "s1", codec.from_epoch_ms(0), 0, b"x")
    produce_and_flush(
        kafka_io.make_producer(settings.kafka_brokers),
        topic_names(settings)["frames"],
        [(key, b"not a jpeg", headers)],
    )
    for name, value in {
        "KAFKA_BROKERS": settings.kafka_brokers,
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "TOPIC_PREFIX": settings.topic_prefix,
        "STATE_DIR": str(tmp_path / "state"),
    }.items():
        monkeypatch.setenv(f"WORLDMM_{name}", value)
    recovery = tmp_path / "recovery"
    for _ in range(2):  # the second run resumes from the snapshot and finds nothing new
        result = CliRunner().invoke(app, ["dataflow", "--to-end", "--recovery-dir", str(recovery)])
        assert result.exit_code == 0, result.output
    assert any(recovery.iterdir())
    dlq = kafka_io.consume_all(settings.kafka_brokers, topic_names(settings)["dlq"])
    assert [r.header("reason") for r in dlq] == [codec.TS_TOO_OLD]
