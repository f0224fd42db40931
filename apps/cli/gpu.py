"""CLI commands: gpu-worker (see apps/cli/__init__.py for the registration order)."""

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
            str | None, typer.Option(help="vlm2vec | offline (default: WORLDMM_GPU_BACKEND)")
        ] = None,
        model_dir: Annotated[
            Path | None, typer.Option(help="Local VLM2Vec-V2 checkpoint directory (vlm2vec).")
        ] = None,
        host: Annotated[str | None, typer.Option(help="Bind address.")] = None,
        port: Annotated[int | None, typer.Option(help="Port (default: WORLDMM_GPU_PORT).")] = None,
    ) -> None:
        """Serve the visual encoder (POST /encode-video, /encode-text; GET /healthz, /metrics)."""
        settings = settings_or_exit()
        chosen = backend or settings.gpu_backend
        if chosen not in ("vlm2vec", "offline"):
            typer.echo(f"error: --backend must be vlm2vec or offline, got {chosen!r}", err=True)
            raise typer.Exit(2)
        from apps.gpu_worker.backends.vlm2vec import ModelNotFound
        from apps.gpu_worker.server import serve

        try:
            serve(
                settings,
                backend=chosen,
                model_dir=model_dir or settings.gpu_model_dir,
                host=host or settings.gpu_host,
                port=port or settings.gpu_port,
            )
        except ModelNotFound as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
