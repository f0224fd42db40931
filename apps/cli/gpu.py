"""CLI commands: gpu-worker (see apps/cli/__init__.py for the registration order).

The service's own knobs (backend, checkpoint, bind address, batching) are flags of this
command, not settings: nothing else reads them. Each flag still reads its old
``WORLDMM_GPU_*`` environment variable when it is not given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from apps.cli.common import settings_or_exit


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""

    @app.command("gpu-worker")
    def gpu_worker(
        backend: Annotated[
            str,
            typer.Option(envvar="WORLDMM_GPU_BACKEND", help="offline (CPU) or vlm2vec (weights)."),
        ] = "offline",
        model_dir: Annotated[
            Path | None,
            typer.Option(
                envvar="WORLDMM_GPU_MODEL_DIR",
                help="Local VLM2Vec-V2 checkpoint directory (vlm2vec; never downloaded).",
            ),
        ] = None,
        host: Annotated[str, typer.Option(envvar="WORLDMM_GPU_HOST", help="Bind address.")] = (
            "127.0.0.1"
        ),
        port: Annotated[
            int, typer.Option(envvar="WORLDMM_GPU_PORT", min=1, max=65535, help="Port.")
        ] = 8090,
        batch_size: Annotated[
            int,
            typer.Option(
                envvar="WORLDMM_GPU_BATCH_SIZE", min=1, max=256, help="Most requests per batch."
            ),
        ] = 16,
        max_wait_ms: Annotated[
            float,
            typer.Option(
                envvar="WORLDMM_GPU_MAX_WAIT_MS",
                min=0,
                help="How long a batch waits to fill before it runs.",
            ),
        ] = 10.0,
        queue_size: Annotated[
            int,
            typer.Option(
                envvar="WORLDMM_GPU_QUEUE_SIZE",
                min=1,
                help="Queued requests per endpoint before answering 503.",
            ),
        ] = 64,
        max_body_bytes: Annotated[
            int | None,
            typer.Option(
                envvar="WORLDMM_GPU_MAX_BODY_BYTES",
                min=1024,
                help="Largest request body read (413 above it, before it is read whole); "
                "default: the largest clip the frame limits allow.",
            ),
        ] = None,
    ) -> None:
        """Serve the visual encoder (POST /encode-video, /encode-text; GET /healthz, /metrics)."""
        settings = settings_or_exit()
        if backend not in ("vlm2vec", "offline"):
            typer.echo(f"error: --backend must be vlm2vec or offline, got {backend!r}", err=True)
            raise typer.Exit(2)
        from gpu_worker.app import WorkerConfig
        from gpu_worker.backends.vlm2vec import ModelNotFound
        from gpu_worker.server import serve

        config = WorkerConfig(
            batch_size=batch_size,
            max_wait_ms=max_wait_ms,
            queue_size=queue_size,
            max_body_bytes=max_body_bytes,
        )
        try:
            serve(settings, config, backend=backend, model_dir=model_dir, host=host, port=port)
        except ModelNotFound as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
