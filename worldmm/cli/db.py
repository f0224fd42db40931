"""CLI commands: ``db migrate`` (``topics create`` lives in worldmm/cli/stack.py)."""

from __future__ import annotations

import sys

import typer

from worldmm.cli.common import settings_or_exit
from worldmm.settings import Settings

db_app = typer.Typer(help="Database schema.", no_args_is_help=True)


def _database_url(settings: Settings) -> str:
    """settings.database_url, else the embedded stack's URL (the stack must be up)."""
    if settings.database_url:
        return settings.database_url
    from worldmm.stack import StackError, database_url

    try:
        return database_url(settings)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


@db_app.command("migrate")
def migrate() -> None:
    """Apply pending migrations from schema/ (a no-op when the database is up to date)."""
    from worldmm.store.migrate import SchemaError, apply_migrations

    settings = settings_or_exit()
    url = _database_url(settings)
    try:
        applied = apply_migrations(url, settings)
    except SchemaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    if applied:
        print(f"applied migrations: {', '.join(applied)}")
    else:
        print("database schema is up to date")


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.add_typer(db_app, name="db")
