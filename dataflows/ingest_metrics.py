"""Prometheus metrics of the ingest flow, and the HTTP endpoint each dataflow process serves
them on (``WORLDMM_DATAFLOW_METRICS_PORT``, ``/metrics``; docs/metrics.md lists them).

The model layer's own metrics (worldmm.metrics: provider calls, retries, tokens, the adaptive
in-flight bounds) live in the same default registry and are served here too.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import start_http_server

from worldmm.metrics import counter, gauge, histogram

log = logging.getLogger("worldmm.dataflow.metrics")

WINDOWS = counter(
    "worldmm_ingest_windows_total",
    "Finished windows by scale (seconds) and status (complete, failed, late = a capture that "
    "missed its window and was stored only).",
    "scale status",
)
WINDOW_DURATION = histogram(
    "worldmm_ingest_window_seconds",
    "Wall time from a window's close to its memory being written, by scale.",
    "scale",
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 40, 60, 120, 300, 600),
)
CLOSE_TO_QUERYABLE = histogram(
    "worldmm_ingest_close_to_queryable_seconds",
    "Wall time from a window's end (event time) to its memory being committed, by scale: the "
    "allowed lateness, queueing and the model calls (live input: event time ≈ wall time).",
    "scale",
    buckets=(5, 10, 15, 20, 25, 30, 40, 60, 120, 300, 600, 1800, 3600, 86400),
)
LATE_CAPTURES = counter(
    "worldmm_ingest_late_captures_total",
    "Captures that arrived after their window had closed (stored, not in its memory).",
)
SESSION_ENDS_FORCED = counter(
    "worldmm_ingest_session_ends_forced_total",
    "Session ends applied before their streams had arrived because the next sessions' input "
    "held behind them reached its cap (what arrives of the session later is late).",
)
DLQ_RECORDS = counter(
    "worldmm_ingest_dlq_total", "Records sent to the DLQ, by kind and reason.", "kind reason"
)
DLQ_DELIVERY_FAILURES = counter(
    "worldmm_ingest_dlq_delivery_failures_total",
    "DLQ records the broker did not acknowledge (logged; the flow goes on).",
)
DLQ_PAYLOADS_DROPPED = counter(
    "worldmm_ingest_dlq_payloads_dropped_total",
    "DLQ records sent without their payload: larger than WORLDMM_DLQ_MAX_RECORD_BYTES or "
    "than the broker takes (header payload_dropped says so).",
)
INPUT_LOST = counter(
    "worldmm_ingest_input_lost_records_total",
    "Records the broker no longer holds where this worker's position said it would read or "
    "had read them (lost acknowledged records, or deleted before they were read), by topic, "
    "partition and reason (dataflows/input_gaps.py).",
    "topic partition reason",
)
MODEL_CALLS = counter(
    "worldmm_ingest_model_calls_total",
    "Model calls made by ingest (any provider), by role and outcome (ok, error).",
    "role outcome",
)
MODEL_SECONDS = histogram(
    "worldmm_ingest_model_seconds",
    "Wall time of one ingest model call (retries included), by role.",
    "role",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
CONSUMER_LAG = gauge(
    "worldmm_ingest_consumer_lag",
    "Records not yet read, per topic partition this process reads (high watermark − next "
    "offset; refreshed every few seconds).",
    "topic partition",
)

_served: dict[int, bool] = {}
_served_lock = threading.Lock()


def serve(port: int, host: str = "127.0.0.1") -> bool:
    """Serve ``/metrics`` on ``port`` (0: off). Once per process and port; a port in use is
    logged, never fatal: metrics must not stop ingest."""
    if not port:
        return False
    with _served_lock:
        if port in _served:
            return _served[port]
        try:
            start_http_server(port, addr=host)
        except OSError as exc:
            log.warning("metrics_not_served port=%d error=%s", port, exc)
            _served[port] = False
            return False
        log.info("metrics_served url=http://%s:%d/metrics", host, port)
        _served[port] = True
        return True


# --- model calls ------------------------------------------------------------------------


class TimedModel:
    """Wraps a model object (roles, transcriber, encoder): every public method call is counted
    and timed by role (the method's name) in MODEL_CALLS / MODEL_SECONDS; attributes pass
    through. Works for any provider, the simulated one included."""

    def __init__(self, inner: Any, role: Callable[[str], str] = lambda name: name) -> None:
        self._inner = inner
        self._role = role
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name.startswith("_") or not callable(value):
            return value
        wrapped = self._cache.get(name)
        if wrapped is None:
            wrapped = self._cache[name] = _timed(value, self._role(name))
        return wrapped


def _timed(fn: Callable[..., Any], role: str) -> Callable[..., Any]:
    ok, err = MODEL_CALLS.labels(role, "ok"), MODEL_CALLS.labels(role, "error")
    seconds = MODEL_SECONDS.labels(role)

    @contextmanager
    def counted() -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        except Exception:
            err.inc()
            raise
        ok.inc()
        seconds.observe(time.perf_counter() - started)

    if asyncio.iscoroutinefunction(fn):

        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            with counted():
                return await fn(*args, **kwargs)

        return timed_async

    def timed(*args: Any, **kwargs: Any) -> Any:
        with counted():
            return fn(*args, **kwargs)

    return timed


def timed_deps(deps: Any) -> Any:
    """``deps`` with its roles, transcriber and encoder counted and timed (MODEL_*)."""
    # Test doubles of the deps may lack some of these: wrap what is there.
    if getattr(deps, "roles", None) is not None:
        deps.roles = TimedModel(deps.roles)
    if getattr(deps, "transcriber", None) is not None:
        deps.transcriber = TimedModel(deps.transcriber, lambda name: "asr")
    if getattr(deps, "encoder", None) is not None:
        deps.encoder = TimedModel(deps.encoder)
    return deps


# --- consumer lag -----------------------------------------------------------------------


class LagTracker:
    """Next offset per (topic, partition) as records are read (a dict store per record), and
    a daemon thread that turns them into CONSUMER_LAG against the broker's high watermarks."""

    def __init__(self, brokers: str, interval_s: float = 5.0) -> None:
        self.brokers = brokers
        self.interval_s = interval_s
        self.next_offset: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def seen(self, topic: str, partition: int | None, offset: int | None) -> None:
        if partition is not None and offset is not None:
            self.next_offset[(topic, partition)] = offset + 1

    def start(self) -> LagTracker:
        self._thread = threading.Thread(target=self._run, name="worldmm-lag", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        from confluent_kafka import Consumer

        # No subscription: this consumer only asks for watermarks, it never fetches.
        consumer = Consumer(
            {"bootstrap.servers": self.brokers, "group.id": "worldmm-lag-probe",
             "enable.auto.commit": False}
        )  # fmt: skip
        try:
            while not self._stop.wait(self.interval_s):
                self.refresh(consumer.get_watermark_offsets)
        finally:
            consumer.close()

    def refresh(self, watermarks: Callable[..., tuple[int, int]]) -> None:
        from confluent_kafka import TopicPartition

        for (topic, partition), nxt in list(self.next_offset.items()):
            try:
                _, high = watermarks(TopicPartition(topic, partition), timeout=2, cached=False)
            except Exception as exc:  # noqa: BLE001 - a broker hiccup only delays the gauge
                log.debug("lag_probe_failed topic=%s partition=%d error=%s", topic, partition, exc)
                continue
            CONSUMER_LAG.labels(topic, str(partition)).set(max(high - nxt, 0))


_trackers: dict[str, LagTracker] = {}


def lag_tracker(brokers: str) -> LagTracker:
    """The process's tracker for ``brokers``, started on first use (every flow built in one
    process shares it: one probe thread, whatever the number of flows)."""
    with _served_lock:
        tracker = _trackers.get(brokers)
        if tracker is None:
            tracker = _trackers[brokers] = LagTracker(brokers).start()
        return tracker
