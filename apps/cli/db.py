"""CLI commands: ``db migrate`` (``topics create`` lives in apps/cli/stack.py)."""

from __future__ import annotations

import sys

import typer

from apps.cli.common import service_settings, settings_or_exit
from worldmm.settings import Settings

db_app = typer.Typer(help="Database schema.", no_args_is_help=True)


def _database_url(settings: Settings) -> str:
    """settings.database_url, else the running embedded stack's (exits 2 when neither)."""
    return settings.database_url or service_settings("postgres").database_url or ""


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


@db_app.command("backfill-embeddings")
def backfill_embeddings(
    user_id: str | None = typer.Option(
        None, "--user-id", help="Only this user's segments (default: every user's)."
    ),
    batch_size: int = typer.Option(64, "--batch-size", min=1, max=4096, help="Segments per batch."),
) -> None:
    """Embed the text of segments that have no embedding by the configured embedder (memories
    written before migration 0004, or by another model), with a progress bar. Safe to stop
    and run again: each batch is committed, and done segments are skipped."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from worldmm.embed import build_embedder
    from worldmm.memory.backfill import backfill_segment_embeddings
    from worldmm.store.db import Database

    settings = settings_or_exit()
    url = _database_url(settings)
    embedder = build_embedder(settings)
    db = Database(url, max_size=2)
    columns = (
        TextColumn("[bold]segment embeddings"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    try:
        with Progress(*columns, transient=False) as progress:
            task = progress.add_task("embed", total=None)
            report = backfill_segment_embeddings(
                db,
                embedder,
                user_id=user_id,
                batch_size=batch_size,
                on_total=lambda n: progress.update(task, total=n),
                on_batch=lambda n: progress.advance(task, n),
            )
    finally:
        db.close()
    print(
        f"embedded {report.written} of {report.total} segments with {embedder.name}"
        f" in {report.seconds:.1f} s"
    )


@db_app.command("backfill-importance")
def backfill_importance_command(
    user_id: list[str] = typer.Option(
        None, "--user-id", help="Only these users (repeatable; default: every user)."
    ),
) -> None:
    """Estimate the importance of segments no model or note rated (memories written before
    migration 0015, or after the estimate changed), one transaction per user. Needs the
    segment embeddings (`worldmm db backfill-embeddings`) for the novelty cue."""
    from worldmm.memory.importance import backfill_importance
    from worldmm.store.db import Database
    from worldmm.store.distribute import spans_wearers

    settings = settings_or_exit()
    db = Database(_database_url(settings), max_size=2)
    try:
        with db.connection() as conn:
            if not user_id:
                spans_wearers(conn)  # every wearer
            users = user_id or [r[0] for r in conn.execute("SELECT id FROM users ORDER BY id")]
        for uid in users:
            with db.transaction() as conn:
                fine, coarse = backfill_importance(conn, uid)
            print(f"{uid}: {fine} windows and {coarse} summaries estimated")
    finally:
        db.close()


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.add_typer(db_app, name="db")
