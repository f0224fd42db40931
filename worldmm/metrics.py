"""Prometheus metrics of the core (models, blob store, retrieval, privacy), and the one way
every part declares a metric: a name, its help and its labels as one string. They live in
the default registry, which the services expose on ``/metrics`` beside their own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from prometheus_client import REGISTRY, Counter, Gauge, Histogram


def counter(name: str, doc: str, labels: str = "", registry=REGISTRY) -> Counter:
    """A counter; ``labels``: its label names, space-separated."""
    return Counter(name, doc, labels.split(), registry=registry)


def gauge(name: str, doc: str, labels: str = "", registry=REGISTRY) -> Gauge:
    return Gauge(name, doc, labels.split(), registry=registry)


def histogram(
    name: str, doc: str, labels: str = "", registry=REGISTRY, *, buckets: Sequence[float]
) -> Histogram:
    return Histogram(name, doc, labels.split(), registry=registry, buckets=buckets)


_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 60, 120, 300)

# --- model layer ------------------------------------------------------------------------
LLM_REQUESTS = counter(
    "worldmm_llm_requests_total",
    "LLM calls by role, provider, dispatch mode and outcome (ok, error, parse_error).",
    "role provider dispatch outcome",
)
LLM_LATENCY = histogram(
    "worldmm_llm_latency_seconds",
    "Wall time of one LLM call including retries (direct) or batch turnaround (batch).",
    "role provider dispatch",
    buckets=_LATENCY_BUCKETS + (600, 1800, 3600, 86400),
)
LLM_TOKENS = counter(
    "worldmm_llm_tokens_total",
    "Tokens the provider reported, by role and kind (prompt, completion, cached: the part "
    "of prompt served from its prompt cache, reasoning: the part of completion spent "
    "reasoning).",
    "role provider kind",
)
# One series per user and kind for the first USER_SERIES users a process sees (4 each); the
# others count under user_id="_other" (per-user usage is in the database: the usage API).
USER_SERIES = 200
USER_TOKENS = counter(
    "worldmm_llm_user_tokens_total",
    "Tokens the provider reported for one user's calls, by kind (prompt, completion, cached, "
    f"reasoning); users past the first {USER_SERIES} of a process count as user _other.",
    "user_id kind",
)


class BoundedLabel:
    """A label's values, at most ``limit`` distinct ones per process: any value after them
    is ``other``, so a stream of new user ids cannot grow the series without bound."""

    def __init__(self, limit: int, other: str = "_other") -> None:
        self.limit = limit
        self.other = other
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) < self.limit:
                self._seen.add(value)
                return value
        return self.other


USER_LABEL = BoundedLabel(USER_SERIES)
WINDOWS_DEGRADED = counter(
    "worldmm_windows_degraded_total",
    "30 s windows captioned without the vision call, by reason (daily_token_budget).",
    "reason",
)
LLM_RETRIES = counter(
    "worldmm_llm_retries_total",
    "Retried model API attempts (chat roles, embed, asr) by reason (rate_limit, server_error, "
    "timeout, connection, repair).",
    "role provider reason",
)
LLM_BATCHES = counter(
    "worldmm_llm_batches_total",
    "Batch API jobs by final status (completed, failed, expired, cancelled).",
    "provider status",
)
LLM_BATCH_LINES_RETRIED = counter(
    "worldmm_llm_batch_lines_retried_total",
    "Batch lines that failed and were retried directly.",
    "provider",
)
# Adaptive in-flight bounds (worldmm.llm.adaptive): scope llm_calls (the direct dispatcher)
# or windows (the ingest construction step); several loops of one process share a child.
CONCURRENCY_LIMIT = gauge(
    "worldmm_concurrency_limit",
    "Current adaptive bound on calls in flight (grows with the backlog, halves on 429).",
    "scope",
)
CONCURRENCY_IN_FLIGHT = gauge(
    "worldmm_concurrency_in_flight", "Calls in flight under the adaptive bound.", "scope"
)
CONCURRENCY_WAITING = gauge(
    "worldmm_concurrency_waiting", "Calls waiting for a slot of the adaptive bound.", "scope"
)
EMBED_LATENCY = histogram(
    "worldmm_embed_latency_seconds",
    "Wall time of one embed() call.",
    "backend",
    buckets=_LATENCY_BUCKETS,
)
EMBED_TEXTS = counter("worldmm_embed_texts_total", "Texts embedded.", "backend")
EMBED_ERRORS = counter("worldmm_embed_errors_total", "Failed embedding calls.", "backend")
ASR_LATENCY = histogram(
    "worldmm_asr_latency_seconds",
    "Wall time of one transcription.",
    "backend",
    buckets=_LATENCY_BUCKETS,
)
ASR_AUDIO_SECONDS = counter(
    "worldmm_asr_audio_seconds_total", "Seconds of audio transcribed.", "backend"
)
ASR_ERRORS = counter(
    "worldmm_asr_errors_total", "Failed transcriptions by reason (decode, api).", "backend reason"
)

# --- blob store -------------------------------------------------------------------------
BLOB_REQUESTS = counter(
    "worldmm_blob_requests_total",
    "Blob store requests by backend (local, s3) and operation (put, get, get_range, head,"
    " list, delete): on S3, what is billed per request.",
    "backend op",
)
BLOB_BYTES = counter(
    "worldmm_blob_bytes_total",
    "Bytes written to (put) and read from (get) the blob store.",
    "backend direction",
)

RECALLS_WRITTEN = counter(
    "worldmm_recalls_written_total",
    "Recalls written to the store (evidence of answers, notes), by kind of row.",
    "kind",
)
RECALLS_DROPPED = counter(
    "worldmm_recalls_dropped_total", "Recalls dropped because the recall queue was full."
)
# --- retrieval (worldmm.memory.retrieval) ---------------------------------------------------
_SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
RETRIEVAL_STAGE = histogram(
    "worldmm_retrieval_stage_seconds",
    "Wall time of one stage of an episodic search: prepare (the question's time, entities and "
    "embedding), each lane (lexical, dense, graph, entity; they run at once, so their sum "
    "exceeds the search), drill_down (fusion and the children's lanes), hits (their text).",
    "stage",
    buckets=_SEARCH_BUCKETS,
)
# --- privacy (worldmm.privacy) -------------------------------------------------------------
RETENTION_DELETED = counter(
    "worldmm_retention_deleted_total",
    "Raw media deleted by retention: rows by table (frames, audio_chunks) and blobs.",
    "kind",
)
FACES_BLURRED = counter(
    "worldmm_faces_blurred_total", "Faces found and blurred in frames before they were stored."
)
FACE_BLUR_FRAMES = counter(
    "worldmm_face_blur_frames_total",
    "Frames stored with blurring on, by what was done: detected (searched for faces, any found "
    "blurred), veiled (the detection budget did not reach it: the whole frame obscured), "
    "unreadable (not a decodable JPEG: a grey frame stored instead).",
    "outcome",
)
FACE_DETECT_CPU_SECONDS = counter(
    "worldmm_face_detect_cpu_seconds_total",
    "CPU time of the detected frames (decode, detect, blur, encode): what "
    "WORLDMM_FACE_BLUR_CORES limits.",
)
FACE_BLUR_SECONDS = histogram(
    "worldmm_face_blur_seconds",
    "Wall time of face detection + blur of one frame (decode and re-encode included).",
    "",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2),
)
PAUSED_CAPTURES = counter(
    "worldmm_paused_captures_total",
    "Captures dropped unstored because they fell inside a privacy pause.",
    "kind",
)
