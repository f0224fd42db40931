"""The flow's DLQ output: every failure reaches the ``dlq`` topic or is counted, and none
takes the worker down.

Bytewax's Kafka sink used librdkafka's 1 MB default and checked no delivery: one bad record
over the broker's limit raised in the worker, and recovery replayed it into the same crash.
Here each record is fitted to ``WORLDMM_DLQ_MAX_RECORD_BYTES`` first (a larger copy goes
without its payload, and says so), one the broker still refuses as too large is sent again
without it, and each batch is flushed before the flow moves on (a snapshot never counts on
records still in the producer's queue); what is lost anyway is logged and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bytewax.outputs import DynamicSink, StatelessSinkPartition

from connectors.dlq import DlqProducer, DlqRecord
from connectors.kafka_io import DeliveryError
from dataflows.ingest_metrics import DLQ_DELIVERY_FAILURES, DLQ_PAYLOADS_DROPPED

log = logging.getLogger("worldmm.dataflow.dlq")

FLUSH_TIMEOUT_S = 10.0


class _DlqPartition(StatelessSinkPartition[DlqRecord]):
    def __init__(self, producer: DlqProducer) -> None:
        self.dlq = producer

    def write_batch(self, items: list[DlqRecord]) -> None:
        dropped = self.dlq.payloads_dropped
        for record in items:
            try:
                self.dlq.send(record)
            except Exception as exc:  # noqa: BLE001 - counted and logged; the flow goes on
                _lost(1, f"{type(exc).__name__}: {exc}", record)
        self._flush()
        DLQ_PAYLOADS_DROPPED.inc(self.dlq.payloads_dropped - dropped)

    def _flush(self) -> None:
        try:
            self.dlq.flush(FLUSH_TIMEOUT_S)
        except DeliveryError as exc:
            _lost(len(exc.failures), str(exc))
        except Exception as exc:  # noqa: BLE001 - as above
            _lost(1, f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._flush()
        self.dlq.producer = None  # the producer goes now, not when the flow object does


def _lost(n: int, error: str, record: DlqRecord | None = None) -> None:
    DLQ_DELIVERY_FAILURES.inc(n)
    reason = record.header("reason") if record is not None else None
    log.error("dlq_delivery_failed records=%d reason=%s error=%s", n, reason, error)


class DlqSink(DynamicSink[DlqRecord]):
    """DLQ records to ``topic``, fitted to ``max_record_bytes`` (one producer per worker)."""

    def __init__(
        self,
        brokers: str,
        topic: str,
        max_record_bytes: int,
        producer_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.brokers = brokers
        self.topic = topic
        self.max_record_bytes = max_record_bytes
        self.producer_factory = producer_factory

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _DlqPartition:
        producer = self.producer_factory() if self.producer_factory else self.brokers
        return _DlqPartition(DlqProducer(producer, self.topic, self.max_record_bytes))
