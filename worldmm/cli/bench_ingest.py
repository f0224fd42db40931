"""CLI: one benchmark command (see worldmm/cli/bench.py)."""

from __future__ import annotations

import typer


def register(bench_app: typer.Typer) -> None:
    """Not written yet: this benchmark's command is added by its issue."""
