"""``worldmm bench <name>``: each benchmark registers its command from its own module.

The benchmarks are part of a checkout, not of the installed package; ``apps.cli`` adds this
group only when it finds them (see ``apps.cli.bench_group``)."""

from __future__ import annotations

import typer

from bench.cli import api_load, chaos, egolife, gpu, ingest, query


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(
        help="Benchmarks; each writes a JSON report (--out).", no_args_is_help=True
    )
    for module in (ingest, query, gpu, egolife, chaos, api_load):
        module.register(bench_app)
    app.add_typer(bench_app, name="bench")
