"""The embedded local stack (Kafka-protocol broker, PostgreSQL + pgvector, Redis) and the
resolution of service URLs for production, where the same code starts nothing."""

from worldmm.stack.manager import (
    StackUrls,
    database_url,
    down,
    kafka_brokers,
    redis_url,
    resolve_urls,
    status,
    up,
)
from worldmm.stack.process import StackError

__all__ = [
    "StackError",
    "StackUrls",
    "database_url",
    "down",
    "kafka_brokers",
    "redis_url",
    "resolve_urls",
    "status",
    "up",
]
