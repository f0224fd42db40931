"""Prometheus metrics of one service instance (own registry, so several apps can coexist)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "gpu_worker_requests_total",
            "Requests by endpoint and status code.",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gpu_worker_request_seconds",
            "Request latency (queue + encode).",
            ["endpoint"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "gpu_worker_batch_size",
            "Requests per executed batch.",
            ["kind"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=self.registry,
        )
        self.batch_seconds = Histogram(
            "gpu_worker_batch_seconds",
            "Model time per batch.",
            ["kind"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "gpu_worker_queue_depth",
            "Requests waiting for a batch.",
            ["kind"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "gpu_worker_rejected_total",
            "Requests refused because the queue was full.",
            ["kind"],
            registry=self.registry,
        )
