"""CLI: `worldmm demo` — the main job end to end on the embedded defaults."""

from __future__ import annotations

import typer

from worldmm.cli.common import settings_or_exit


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    keep: bool = typer.Option(False, "--keep", help="Leave the stack running afterwards."),
) -> None:
    """Start the stack, migrate, and round-trip a message through Kafka into PostgreSQL."""
    from worldmm.demo.smoke import run_smoke

    settings = settings_or_exit()
    raise typer.Exit(run_smoke(settings, keep=keep, echo=typer.echo))
