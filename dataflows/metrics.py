"""Prometheus metrics of the ingest flow (names documented here, in the default registry)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

WINDOWS = Counter(
    "worldmm_ingest_windows_total",
    "Finished windows by scale (seconds) and status (complete, failed, late = a capture that "
    "missed its window and was stored only).",
    ["scale", "status"],
)
WINDOW_DURATION = Histogram(
    "worldmm_ingest_window_seconds",
    "Wall time from a window's close to its memory being written, by scale.",
    ["scale"],
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 40, 60, 120, 300, 600),
)
WINDOW_LAG = Histogram(
    "worldmm_ingest_window_lag_seconds",
    "Wall time between a window's end (event time) and its memory being written, by scale.",
    ["scale"],
    buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 86400),
)
DLQ_RECORDS = Counter(
    "worldmm_ingest_dlq_total", "Records sent to the DLQ, by kind and reason.", ["kind", "reason"]
)
