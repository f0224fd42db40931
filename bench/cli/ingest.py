"""CLI: ``worldmm bench ingest`` (registered on the bench sub-app by bench/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("ingest")
    def ingest(
        out: Annotated[Path, typer.Option(help="Where to write the JSON result.")],
        users_max: Annotated[int, typer.Option(help="Most simulated users tried.")] = 2048,
        users_start: Annotated[int, typer.Option(help="Users of the first level.")] = 1,
        factor: Annotated[int, typer.Option(help="Users ×factor from one level to the next.")] = 4,
        minutes: Annotated[float, typer.Option(help="Real-time stream per level.")] = 1.0,
        model_latency_s: Annotated[
            float, typer.Option(help="Simulated latency of every model call (s).")
        ] = 2.0,
        concurrency: Annotated[
            int, typer.Option(help="Windows in flight at first (llm_concurrency).")
        ] = 16,
        concurrency_max: Annotated[
            int, typer.Option(help="Adaptive bound's ceiling (0: WORLDMM_LLM_CONCURRENCY_MAX).")
        ] = 0,
        seed: Annotated[int, typer.Option(help="Frame generator seed.")] = 0,
        blob_root: Annotated[
            str, typer.Option(help="Parent of each level's blob dir (default: temp dir).")
        ] = "",
        keep: Annotated[bool, typer.Option(help="Keep the simulated users' rows.")] = False,
        profile: Annotated[
            bool, typer.Option(help="Sample the worker with py-spy: CPU by pipeline part.")
        ] = False,
    ) -> None:
        """Users one dataflow worker keeps in real time (1 fps each, simulated model latency),
        CPU ms per 30 s window without model time, and window close → queryable p50/p95."""
        from bench.ingest import main

        argv = [
            "--out", str(out),
            "--users-max", str(users_max),
            "--users-start", str(users_start),
            "--factor", str(factor),
            "--minutes", str(minutes),
            "--model-latency-s", str(model_latency_s),
            "--concurrency", str(concurrency),
            "--seed", str(seed),
        ]  # fmt: skip
        if blob_root:
            argv += ["--blob-root", blob_root]
        if concurrency_max:
            argv += ["--concurrency-max", str(concurrency_max)]
        if keep:
            argv.append("--keep")
        if profile:
            argv.append("--profile")
        main(argv)
