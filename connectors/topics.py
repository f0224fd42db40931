"""Kafka topic names and their creation (idempotent) with the configured partition count."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from worldmm.settings import Settings

TOPIC_KINDS = ("frames", "audio", "control", "dlq")


def topic_names(settings: Settings) -> dict[str, str]:
    """Kind → full topic name, e.g. ``{"frames": "worldmm.frames", ...}``."""
    return {kind: settings.topic(kind) for kind in TOPIC_KINDS}


def create_topics(brokers: str, settings: Settings, timeout_s: float = 30.0) -> dict[str, str]:
    """Create the four topics; existing ones are left as they are. Returns name → outcome."""
    admin = AdminClient({"bootstrap.servers": brokers})
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    wanted = [
        NewTopic(
            name,
            num_partitions=settings.topic_partitions,
            replication_factor=settings.topic_replication,
        )
        for name in topic_names(settings).values()
        if name not in existing
    ]
    outcome = {name: "exists" for name in topic_names(settings).values() if name in existing}
    if wanted:
        for name, future in admin.create_topics(wanted, operation_timeout=timeout_s).items():
            try:
                future.result(timeout=timeout_s)
                outcome[name] = "created"
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == exc.args[0].TOPIC_ALREADY_EXISTS:
                    outcome[name] = "exists"
                else:
                    raise
    return outcome
