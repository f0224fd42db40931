"""Start the service: load the backend once, then serve with uvicorn."""

from __future__ import annotations

import logging
from pathlib import Path

from gpu_worker.app import WorkerConfig, create_app
from gpu_worker.backends import load_backend
from worldmm.settings import Settings

log = logging.getLogger("gpu_worker")


def serve(
    settings: Settings,
    config: WorkerConfig,
    *,
    backend: str,
    model_dir: Path | None,
    host: str,
    port: int,
) -> None:
    import uvicorn

    encoder = load_backend(
        backend,
        dim=settings.visual_embed_dim,
        model_dir=model_dir,
        ocr_frames=settings.ocr_frames,
    )
    if encoder.dim != settings.visual_embed_dim:
        log.warning(
            "gpu_worker.dim_mismatch backend_dim=%d configured=%d: clients configured with "
            "WORLDMM_VISUAL_EMBED_DIM=%d will refuse these vectors",
            encoder.dim,
            settings.visual_embed_dim,
            settings.visual_embed_dim,
        )
    app = create_app(encoder, config)
    uvicorn.run(app, host=host, port=port, log_level=settings.log_level.lower())
