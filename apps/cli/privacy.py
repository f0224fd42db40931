"""CLI commands of privacy (docs/privacy.md): ``retention run`` and ``export``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import typer

from apps.cli.common import parse_time, settings_or_exit

retention_app = typer.Typer(help="Retention of raw media (frames, audio).", no_args_is_help=True)


def _stores(settings):  # type: ignore[no-untyped-def]
    from apps.cli.db import _database_url
    from worldmm.blobs import build_blob_store
    from worldmm.store.db import Database

    return Database(_database_url(settings), max_size=2), build_blob_store(settings)


@retention_app.command("run")
def retention_run(
    users: list[str] | None = typer.Option(
        None, "--user", help="Only this user (repeat for several; default: every user)."
    ),
    now: str | None = typer.Option(
        None, "--now", help="Apply retention as of this ISO time (default: now)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would go; delete nothing."),
) -> None:
    """Delete frames and audio older than each user's retention (their own, else
    WORLDMM_MEDIA_RETENTION_DAYS); text memory and visual embeddings stay. Idempotent and
    resumable: safe to run from cron or a Kubernetes CronJob, and to stop at any point."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from worldmm.privacy import retention

    settings = settings_or_exit()
    at = parse_time(now, "--now") or datetime.now(UTC)
    db, blobs = _stores(settings)
    try:
        cutoffs = retention.plan(db, settings.media_retention_days, at, users)
        totals = {u: retention.count_expired(db, u, c) for u, c in cutoffs.items()}
        if dry_run:
            for user, n in totals.items():
                print(f"{user}: {n} expired frame/audio rows (before {cutoffs[user].isoformat()})")
            print(f"dry run: {sum(totals.values())} rows of {len(cutoffs)} users would go")
            return
        columns = (
            TextColumn("[bold]retention"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        rows = files = 0
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task("expire", total=sum(totals.values()))
            for user, limit in cutoffs.items():
                done = retention.expire_user(
                    db,
                    blobs,
                    user,
                    limit,
                    batch=settings.retention_batch,
                    progress=lambda _u, n: bar.advance(task, n),
                )
                rows, files = rows + done.deleted, files + done.blobs
    finally:
        db.close()
    print(f"retention: deleted {rows} rows and {files} blobs of {len(cutoffs)} users")


def export(
    user: str = typer.Option(..., "--user", help="The user whose data to export."),
    out: Path = typer.Option(..., "--out", help="The archive to write (.tar.gz)."),
) -> None:
    """Everything held about one user as one archive (manifest.json with counts and
    checksums, tables/*.jsonl, media/...), read straight from the database and blob store
    and streamed to --out. A purged user's archive holds no memory."""
    import json
    import tarfile

    from worldmm.privacy.export import export_user
    from worldmm.store.admin_audit import record_admin_action

    settings = settings_or_exit()
    db, blobs = _stores(settings)
    partial = out.with_name(out.name + ".partial")
    written = 0
    try:
        with partial.open("wb") as fh:
            for chunk in export_user(db, blobs, user, datetime.now(UTC)):
                fh.write(chunk)
                written += len(chunk)
        partial.replace(out)  # never a truncated archive under the asked name
        with db.transaction() as conn:
            record_admin_action(conn, "user.export", actor="cli", subject_user=user)
    finally:
        partial.unlink(missing_ok=True)
        db.close()
    with tarfile.open(out, "r:gz") as tar:
        manifest = tar.extractfile("manifest.json")
        assert manifest is not None
        tables = json.load(manifest)["tables"]
    rows = sum(n for t, n in tables.items() if t != "admin_audit")
    print(f"exported {rows} rows of {user} ({written} bytes) to {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(retention_app, name="retention")
    app.command("export")(export)
