"""CLI: `worldmm demo` — the main job end to end on the embedded defaults."""

from __future__ import annotations

import typer

from apps.cli.common import settings_or_exit


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    keep: bool = typer.Option(
        False, "--keep", help="Leave the stack and the query API running for exploration."
    ),
    minutes: float = typer.Option(
        5.0, "--minutes", min=0.5, max=60.0, help="Length of the generated session."
    ),
    seed: int = typer.Option(7, "--seed", help="Seed of the generated session."),
    stop: bool = typer.Option(
        False, "--stop", help="Only stop what an earlier `demo --keep` left running."
    ),
) -> None:
    """Stream a generated glasses session into memory and ask the query API about it."""
    from apps.demo.run import DemoOptions, run_demo, stop_kept

    settings = settings_or_exit()
    if stop:
        stop_kept(settings, typer.echo)
        return
    result = run_demo(settings, DemoOptions(minutes=minutes, keep=keep, seed=seed))
    raise typer.Exit(result.exit_code)
