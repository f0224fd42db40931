"""Prometheus metrics of the query API (default registry, next to the model layer's metrics in
``worldmm.metrics``, so one ``/metrics`` shows both). Defined once per process."""

from __future__ import annotations

from worldmm.metrics import counter, histogram

API_REQUESTS = counter(
    "worldmm_api_requests_total",
    "Query API requests by method, route template and status code.",
    "method route status",
)
API_LATENCY = histogram(
    "worldmm_api_request_seconds",
    "Query API request latency by method and route template.",
    "method route",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
API_MODEL_ERRORS = counter(
    "worldmm_api_model_errors_total",
    "Requests answered 502 because a model call failed, by route template.",
    "route",
)
