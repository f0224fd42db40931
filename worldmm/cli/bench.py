"""CLI commands: `worldmm bench <name>` — each benchmark registers itself from its own module."""

from __future__ import annotations

import typer

from worldmm.cli import (
    bench_api_load,
    bench_chaos,
    bench_egolife,
    bench_gpu,
    bench_ingest,
    bench_query,
)


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(
        help="Benchmarks; each writes a JSON report (--out).", no_args_is_help=True
    )
    modules = (bench_ingest, bench_query, bench_gpu, bench_egolife, bench_chaos, bench_api_load)
    for module in modules:
        module.register(bench_app)
    app.add_typer(bench_app, name="bench")
