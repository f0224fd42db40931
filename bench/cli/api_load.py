"""CLI: ``worldmm bench api-load`` (registered on the bench sub-app by bench/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("api-load")
    def api_load(
        out: Annotated[Path, typer.Option(help="Where to write the JSON result.")],
        clients: Annotated[int, typer.Option(help="Concurrent clients.")] = 8,
        duration: Annotated[float, typer.Option(help="Measured seconds.")] = 30.0,
        warmup: Annotated[float, typer.Option(help="Seconds before measuring.")] = 10.0,
        processes: Annotated[int, typer.Option(help="worldmm serve processes.")] = 2,
        days: Annotated[float, typer.Option(help="Days of synthetic memory to load.")] = 1.0,
        seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
        timeout: Annotated[float, typer.Option(help="Per-request timeout (s).")] = 30.0,
        user: Annotated[str | None, typer.Option(help="User id (default: fresh).")] = None,
        reuse: Annotated[bool, typer.Option(help="Use the existing --user as it is.")] = False,
        keep: Annotated[bool, typer.Option(help="Keep a user this run loaded.")] = False,
    ) -> None:
        """Throughput, p50/p95/p99 and errors per route (ask, segments, semantic, visual)
        with N concurrent clients against `worldmm serve` processes on loopback."""
        from bench.api_load import main

        argv = ["--out", str(out), "--clients", str(clients), "--duration", str(duration)]
        argv += ["--warmup", str(warmup), "--processes", str(processes), "--days", str(days)]
        argv += ["--seed", str(seed), "--timeout", str(timeout)]
        if user is not None:
            argv += ["--user", user]
        if reuse:
            argv.append("--reuse")
        if keep:
            argv.append("--keep")
        main(argv)
