"""CLI commands: ingest (see worldmm/cli/__init__.py for the registration order)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
