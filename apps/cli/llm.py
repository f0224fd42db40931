"""CLI commands: ``worldmm llm check`` (see apps/cli/__init__.py for the registration)."""

from __future__ import annotations

import typer

llm_app = typer.Typer(help="Model providers: LLM roles, embeddings, ASR.", no_args_is_help=True)


@llm_app.command("check")
def check() -> None:
    """Show the model of every role and make one live round trip per component."""
    from rich.console import Console
    from rich.table import Table

    from apps.cli.common import settings_or_exit
    from worldmm.model_check import run_checks

    settings = settings_or_exit()
    console = Console()
    label = "offline" if settings.llm_provider == "offline" else settings.llm_provider
    console.print(f"LLM provider: [bold]{label}[/bold]  dispatch: {settings.llm_dispatch}")
    with console.status("running round trips..."):
        models, results = run_checks(settings)
    roles = Table("role", "model")
    for role, model in models.items():
        roles.add_row(role, model)
    console.print(roles)
    trips = Table("check", "result", "seconds", "detail")
    for r in results:
        trips.add_row(
            r.name,
            "[green]ok[/green]" if r.ok else "[red]FAILED[/red]",
            f"{r.seconds:.2f}",
            r.detail,
        )
    console.print(trips)
    if not all(r.ok for r in results) or len(results) < 5:
        console.print("[red]llm check failed[/red]")
        raise typer.Exit(1)
    console.print("[green]all model round trips succeeded[/green]")


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.add_typer(llm_app, name="llm")
