"""CLI: ``worldmm bench query`` (registered on the bench sub-app by bench/cli/__init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("query")
    def query(
        out: Annotated[Path, typer.Option(help="Where to write the JSON result.")],
        days: Annotated[float, typer.Option(help="Days of synthetic memory (whole hours).")] = 7.0,
        queries: Annotated[int, typer.Option(help="Warm queries per memory type.")] = 20,
        cold_queries: Annotated[int, typer.Option(help="Cold queries per memory type.")] = 5,
        users: Annotated[
            int, typer.Option(help="Users loaded: the measured one plus N-1 others.")
        ] = 1,
        new_segments: Annotated[
            int, typer.Option(help="New 30 s segments written, each timed to visibility.")
        ] = 5,
        seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
        user: Annotated[str | None, typer.Option(help="User id to load (default: fresh).")] = None,
        keep: Annotated[bool, typer.Option(help="Keep the loaded user afterwards.")] = False,
        reuse: Annotated[
            bool,
            typer.Option(
                help="Measure an existing --user kept by an earlier --keep run with the same "
                "--days and --seed (its rows are checked) instead of loading again."
            ),
        ] = False,
        keep_indexes: Annotated[
            bool, typer.Option(help="Load into live HNSW indexes (no drop and rebuild).")
        ] = False,
    ) -> None:
        """Retrieval latency (p50/p95, warm and cold graph cache) over a synthetic week of one
        user's memory, graph build time per scale and bulk-load rows/s; model time excluded."""
        from bench.query import main

        argv = [
            "--out",
            str(out),
            "--days",
            str(days),
            "--queries",
            str(queries),
            "--cold-queries",
            str(cold_queries),
            "--seed",
            str(seed),
            "--users",
            str(users),
            "--new-segments",
            str(new_segments),
        ]
        if user is not None:
            argv += ["--user", user]
        if keep:
            argv.append("--keep")
        if keep_indexes:
            argv.append("--keep-indexes")
        if reuse:
            argv.append("--reuse")
        main(argv)
