"""The encoder service: POST /encode-video, POST /encode-text, GET /healthz, GET /metrics."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from gpu_worker.backends.base import EncoderBackend
from gpu_worker.batching import DynamicBatcher, QueueFull
from gpu_worker.worker_metrics import WorkerMetrics
from worldmm.body_limit import BodySizeLimit
from worldmm.encoder.frames import (
    MAX_FRAME_BYTES,
    MAX_FRAMES,
    MAX_TEXT_CHARS,
    InvalidInput,
    check_text,
    decode_frames,
)

log = logging.getLogger("gpu_worker")


class WorkerConfig(BaseModel):
    batch_size: int = Field(default=16, ge=1)
    max_wait_ms: float = Field(default=10.0, ge=0)
    queue_size: int = Field(default=64, ge=1)
    max_frames: int = Field(default=MAX_FRAMES, ge=1)
    max_frame_bytes: int = Field(default=MAX_FRAME_BYTES, ge=1024)
    max_text_chars: int = Field(default=MAX_TEXT_CHARS, ge=1)
    # unset: the largest clip the limits above allow, as base64 JSON (4/3 of its bytes)
    max_body_bytes: int | None = Field(default=None, ge=1024)

    @property
    def body_limit(self) -> int:
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return self.max_frames * (self.max_frame_bytes * 4 // 3 + 4) + 64 * 1024


class TextRequest(BaseModel):
    text: str


class VideoJsonRequest(BaseModel):
    frames: list[str] = Field(description="base64-encoded JPEG/PNG frames")


class EmbeddingResponse(BaseModel):
    embedding: list[float]
    dim: int
    backend: str
    model: str


class Health(BaseModel):
    status: str
    backend: str
    model: str
    dim: int
    device: str
    queue: dict[str, int]


def create_app(backend: EncoderBackend, config: WorkerConfig | None = None) -> FastAPI:
    config = config or WorkerConfig()
    metrics = WorkerMetrics()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encoder")

    def observed(kind: str):
        def record(size: int, seconds: float) -> None:
            metrics.batch_size.labels(kind).observe(size)
            metrics.batch_seconds.labels(kind).observe(seconds)

        return record

    def make_batcher(run, kind: str) -> DynamicBatcher:
        return DynamicBatcher(
            lambda items: list(run(items)),
            executor=executor,
            max_batch=config.batch_size,
            max_wait_s=config.max_wait_ms / 1000,
            max_queue=config.queue_size,
            on_batch=observed(kind),
        )

    batchers = {
        "video": make_batcher(backend.encode_videos, "video"),
        "text": make_batcher(backend.encode_texts, "text"),
    }

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        for batcher in batchers.values():
            batcher.start()
        log.info(
            "gpu_worker.start backend=%s model=%s dim=%d device=%s",
            backend.name,
            backend.model,
            backend.dim,
            backend.device,
        )
        try:
            yield
        finally:
            for batcher in batchers.values():
                await batcher.stop()
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="WorldMM GPU encoder", lifespan=lifespan)
    # a body over the limit is refused (413) before it is read whole
    app.add_middleware(BodySizeLimit, max_bytes=config.body_limit)
    app.state.batchers = batchers
    app.state.metrics = metrics

    async def encode(kind: str, endpoint: str, payload) -> EmbeddingResponse:
        started = time.perf_counter()
        batcher = batchers[kind]
        try:
            vector = await batcher.submit(payload)
        except QueueFull as exc:
            metrics.rejected.labels(kind).inc()
            raise HTTPException(
                503, str(exc), headers={"Retry-After": str(exc.retry_after_s)}
            ) from None
        except Exception as exc:
            log.exception("gpu_worker.encode_failed kind=%s", kind)
            raise HTTPException(500, f"encoding failed: {type(exc).__name__}: {exc}") from exc
        finally:
            metrics.queue_depth.labels(kind).set(batcher.depth)
        metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
        return EmbeddingResponse(
            embedding=[float(x) for x in vector],
            dim=len(vector),
            backend=backend.name,
            model=backend.model,
        )

    @app.middleware("http")
    async def count_requests(request: Request, call_next):
        response = await call_next(request)
        metrics.requests.labels(request.url.path, str(response.status_code)).inc()
        return response

    @app.exception_handler(InvalidInput)
    async def invalid_input(request: Request, exc: InvalidInput) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.post("/encode-video", response_model=EmbeddingResponse)
    async def encode_video(request: Request) -> EmbeddingResponse:
        frames = await _read_frames(request, config)
        images = await asyncio.to_thread(
            decode_frames,
            frames,
            max_frames=config.max_frames,
            max_bytes=config.max_frame_bytes,
        )
        return await encode("video", "/encode-video", images)

    @app.post("/encode-text", response_model=EmbeddingResponse)
    async def encode_text(body: TextRequest) -> EmbeddingResponse:
        text = check_text(body.text, max_chars=config.max_text_chars)
        return await encode("text", "/encode-text", text)

    @app.get("/healthz", response_model=Health)
    async def healthz() -> Health:
        return Health(
            status="ok",
            backend=backend.name,
            model=backend.model,
            dim=backend.dim,
            device=backend.device,
            queue={k: b.depth for k, b in batchers.items()},
        )

    @app.get("/metrics")
    async def prometheus() -> Response:
        for kind, batcher in batchers.items():
            metrics.queue_depth.labels(kind).set(batcher.depth)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


async def _read_frames(request: Request, config: WorkerConfig) -> list[bytes]:
    """Frames from multipart ``frames`` parts or a JSON body ``{"frames": [base64, ...]}``."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        # Starlette answers a malformed body or too many parts with 400 and its message.
        form = await request.form(max_files=config.max_frames, max_part_size=config.max_frame_bytes)
        parts = form.getlist("frames")
        if any(isinstance(p, str) for p in parts):
            raise InvalidInput("multipart 'frames' parts must be files")
        return [await part.read() for part in parts]
    if content_type.startswith("application/json"):
        try:
            body = VideoJsonRequest.model_validate_json(await request.body())
        except ValueError as exc:
            raise InvalidInput(f"bad JSON body: {exc}") from None
        if len(body.frames) > config.max_frames:
            raise InvalidInput(
                f"a clip has at most {config.max_frames} frames, got {len(body.frames)}"
            )
        try:
            return [base64.b64decode(f, validate=True) for f in body.frames]
        except binascii.Error as exc:
            raise InvalidInput(f"a frame is not valid base64: {exc}") from None
    raise HTTPException(
        415, "send frames as multipart/form-data parts named 'frames' or JSON {'frames': [b64]}"
    )
