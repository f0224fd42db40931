"""``worldmm bench <name>``: every benchmark, by name, each imported only when it runs or is
listed (``worldmm --help`` stays fast). The benchmarks are part of a checkout, not of the
installed package: ``apps.cli.bench_group`` adds this group only when it finds them."""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperGroup

BENCHMARKS = {  # name -> module (also ``python -m <module>``)
    "ingest": "bench.ingest",
    "query": "bench.query",
    "semantic-rank": "bench.semantic_rank",
    "lexical-proof": "bench.lexical_proof",
    "api-load": "bench.api_load",
    "gpu-worker": "bench.gpu_worker",
    "egolife": "bench.egolife.run",
    "egolife-tune": "bench.egolife.tune",
    "chaos": "bench.chaos",
    "cost": "bench.cost",
    "asr": "bench.asr",
}


class _Benchmarks(TyperGroup):
    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(BENCHMARKS)

    def get_command(self, ctx: typer.Context, name: str):  # noqa: ANN201 - typer's command
        if name not in BENCHMARKS:
            return None
        command = typer.main.get_command(importlib.import_module(BENCHMARKS[name]).main.app)
        command.name = name
        return command


def register(app: typer.Typer) -> None:
    help_ = "Benchmarks; each writes a JSON report (--out)."
    app.add_typer(typer.Typer(cls=_Benchmarks, help=help_, no_args_is_help=True), name="bench")
