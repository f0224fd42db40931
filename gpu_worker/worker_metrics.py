"""Prometheus metrics of one service instance (own registry, so several apps can coexist)."""

from __future__ import annotations

from functools import partial

from prometheus_client import CollectorRegistry

from worldmm import metrics

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        counter = partial(metrics.counter, registry=self.registry)
        gauge = partial(metrics.gauge, registry=self.registry)
        histogram = partial(metrics.histogram, registry=self.registry)
        self.requests = counter(
            "gpu_worker_requests_total", "Requests by endpoint and status code.", "endpoint status"
        )
        self.latency = histogram(
            "gpu_worker_request_seconds",
            "Request latency (queue + encode).",
            "endpoint",
            buckets=_SECONDS,
        )
        self.batch_size = histogram(
            "gpu_worker_batch_size", "Requests per executed batch.", "kind", buckets=_BATCH_SIZES
        )
        self.batch_seconds = histogram(
            "gpu_worker_batch_seconds", "Model time per batch.", "kind", buckets=_SECONDS
        )
        self.queue_depth = gauge("gpu_worker_queue_depth", "Requests waiting for a batch.", "kind")
        self.rejected = counter(
            "gpu_worker_rejected_total", "Requests refused because the queue was full.", "kind"
        )
