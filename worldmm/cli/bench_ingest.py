"""CLI: ``worldmm bench ingest`` (registered on the bench sub-app by worldmm/cli/bench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("ingest")
    def ingest(
        out: Annotated[Path, typer.Option(help="Where to write the JSON result.")],
        users_max: Annotated[int, typer.Option(help="Most simulated users tried.")] = 64,
        users_start: Annotated[int, typer.Option(help="Users of the first level.")] = 1,
        minutes: Annotated[float, typer.Option(help="Real-time stream per level.")] = 1.0,
        model_latency_s: Annotated[
            float, typer.Option(help="Simulated latency of every model call (s).")
        ] = 2.0,
        concurrency: Annotated[
            int, typer.Option(help="Windows in flight per worker (llm_concurrency).")
        ] = 16,
        seed: Annotated[int, typer.Option(help="Frame generator seed.")] = 0,
        keep: Annotated[bool, typer.Option(help="Keep the simulated users' rows.")] = False,
    ) -> None:
        """Users one dataflow worker keeps in real time (1 fps each, simulated model latency),
        CPU ms per 30 s window without model time, and window close → queryable p50/p95."""
        from bench.ingest import main

        argv = [
            "--out", str(out),
            "--users-max", str(users_max),
            "--users-start", str(users_start),
            "--minutes", str(minutes),
            "--model-latency-s", str(model_latency_s),
            "--concurrency", str(concurrency),
            "--seed", str(seed),
        ]  # fmt: skip
        if keep:
            argv.append("--keep")
        main(argv)
