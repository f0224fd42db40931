"""The embedded local stack (Kafka-protocol broker, PostgreSQL + pgvector, Redis) for
development, the demo and tests: `worldmm up / status / down`, and the URLs of its running
servers for the programs that start services beside it. Production sets the URLs and never
imports this."""

from deploy.stack.manager import (
    StackUrls,
    database_url,
    down,
    kafka_brokers,
    redis_url,
    resolve_urls,
    status,
    up,
    with_stack_urls,
)
from deploy.stack.process import StackError

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
    "with_stack_urls",
]
