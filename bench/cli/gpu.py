"""CLI: ``worldmm bench gpu-worker`` (registered on the bench sub-app by bench/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("gpu-worker")
    def gpu_worker(
        out: Annotated[Path, typer.Option(help="Where to write the JSON result.")],
        backend: Annotated[str, typer.Option(help="offline | vlm2vec")] = "offline",
        random_model: Annotated[
            str | None, typer.Option(help="tiny | 2b: VLM2Vec path on random Qwen2-VL weights")
        ] = None,
        model_dir: Annotated[Path | None, typer.Option(help="VLM2Vec-V2 checkpoint dir.")] = None,
        batches: Annotated[str, typer.Option(help="Batch sizes, comma-separated.")] = "1,4,8,16,32",
        rounds: Annotated[int, typer.Option(help="Full video batches per size.")] = 3,
        text_rounds: Annotated[int, typer.Option(help="Full text batches per size.")] = 10,
        frames: Annotated[int, typer.Option(help="Frames per clip.")] = 16,
        device: Annotated[str | None, typer.Option(help="cpu | cuda (default: best)")] = None,
        plot: Annotated[Path | None, typer.Option(help="Also draw the curves (PNG).")] = None,
    ) -> None:
        """Clips/s, text queries/s and p95 latency of the GPU worker at several batch sizes."""
        from bench.gpu_worker import main

        argv = [
            "--out",
            str(out),
            "--backend",
            backend,
            "--batches",
            batches,
            "--rounds",
            str(rounds),
            "--text-rounds",
            str(text_rounds),
            "--frames",
            str(frames),
        ]
        for flag, value in (
            ("--random-model", random_model),
            ("--model-dir", model_dir),
            ("--device", device),
            ("--plot", plot),
        ):
            if value is not None:
                argv += [flag, str(value)]
        main(argv)
