"""The ``worldmm`` console script. Each command group lives in its own module; service
packages (Bytewax, FastAPI) are imported inside commands so ``worldmm --help`` stays fast."""

from __future__ import annotations

import sys
import traceback

import typer

from apps.cli import bench_group, db, demo, gpu, ingest, llm, mcp, privacy, query, stack, users
from worldmm.redact import redact

app = typer.Typer(
    name="worldmm",
    help="WorldMM Live: a live memory for camera glasses.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

stack.register(app)  # up, down, status
db.register(app)  # db migrate, topics create
llm.register(app)  # llm check
ingest.register(app)  # gateway, dataflow, replay, retrigger
gpu.register(app)  # gpu-worker
query.register(app)  # serve, ask
users.register(app)  # users show, users set-timezone
mcp.register(app)  # mcp (the memory as MCP tools)
demo.register(app)  # demo
privacy.register(app)  # retention run, export
bench_group.register(app)  # bench ingest|query|gpu-worker|egolife|chaos|api-load (a checkout)


def main() -> None:
    try:
        app()
    except Exception:  # noqa: BLE001 - a traceback may quote a URL with its password
        sys.stderr.write(redact(traceback.format_exc()))
        raise SystemExit(1) from None
