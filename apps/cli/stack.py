"""CLI commands: up, status, down — the embedded stack or the configured services."""

from __future__ import annotations

import json

import typer

from apps.cli.common import settings_or_exit
from worldmm.redact import redact


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("status")(status)
    app.command("down")(down)
    topics_app = typer.Typer(help="Kafka topics.", no_args_is_help=True)
    topics_app.command("create")(topics_create)
    app.add_typer(topics_app, name="topics")


def up(
    topics: bool = typer.Option(True, help="Also create the Kafka topics."),
    migrate: bool = typer.Option(True, help="Also apply the database migrations."),
    citus: int | None = typer.Option(
        None,
        "--citus",
        min=0,
        help="Run the database as a Citus coordinator with N workers on loopback (builds "
        "Citus once from the vendored source); 0: single-node PostgreSQL. Default: as last "
        "started.",
    ),
) -> None:
    """Start the embedded Kafka broker, PostgreSQL+pgvector and Redis (harmless if running)."""
    from deploy import stack

    settings = settings_or_exit()
    try:
        if citus:
            from deploy.stack import citus as citus_build

            if citus_build.build(echo=typer.echo):
                typer.echo(f"citus     : built {citus_build.VERSION}")
        urls = stack.up(settings, citus_workers=citus)
    except (stack.StackError, OSError) as exc:
        typer.echo(f"error: {redact(str(exc))}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"state dir : {settings.resolved_state_dir}")
    typer.echo(f"kafka     : {urls.kafka_brokers}")
    typer.echo(f"postgres  : {redact(urls.database_url)}")
    typer.echo(f"redis     : {redact(urls.redis_url) if urls.redis_url else 'disabled'}")
    if migrate:
        from worldmm.store.migrate import apply_migrations

        applied = apply_migrations(urls.database_url, settings)
        typer.echo(f"migrations: {len(applied)} applied")
    if topics:
        from connectors.topics import create_topics

        created = create_topics(urls.kafka_brokers, settings)
        typer.echo("topics    : " + ", ".join(f"{k} ({v})" for k, v in created.items()))


def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Probe each service with a real request; exit 0 only when all answer."""
    from deploy import stack

    result = stack.status(load := settings_or_exit())
    del load
    if as_json:
        typer.echo(
            json.dumps(
                {
                    k: {key: v[key] for key in v if key != "detail" or not v["ok"]}
                    for k, v in result.items()
                }
            )
        )
    else:
        for name, info in result.items():
            where = info.get("brokers") or info.get("url") or "-"
            mark = "ok  " if info["ok"] else "DOWN"
            kind = "embedded" if info["embedded"] else "external"
            typer.echo(f"{mark} {name:9} {where}  ({kind}; {info['detail']})")
    raise typer.Exit(0 if all(v["ok"] for v in result.values()) else 1)


def down() -> None:
    """Stop the embedded servers this state dir started (by PID); leave external ones."""
    from deploy import stack

    stopped = stack.down(settings_or_exit())
    for name, was_running in stopped.items():
        typer.echo(f"{name:9} {'stopped' if was_running else 'was not running'}")


def topics_create(
    partitions: int = typer.Option(None, help="Partitions per topic (default: settings)."),
) -> None:
    """Create the frames, audio, control and dlq topics (existing ones are kept)."""
    from apps.cli.common import service_settings
    from connectors.topics import create_topics

    settings = service_settings("kafka")
    if partitions is not None:
        settings = settings.model_copy(update={"topic_partitions": partitions})
    for name, outcome in create_topics(settings.kafka_brokers or "", settings).items():
        typer.echo(f"{name}: {outcome}")
