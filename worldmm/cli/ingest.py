"""CLI commands: ingest (see worldmm/cli/__init__.py for the registration order).

Each command is one function below; ``register`` attaches them. Heavy imports (Kafka,
PyAV, Bytewax) happen inside the commands.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import typer

from worldmm.settings import Settings


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.command("gateway")(gateway)


# --- gateway ---------------------------------------------------------------------------------


def _parse_start(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"not an ISO time: {value!r}", param_hint="--start") from None
    if ts.tzinfo is None:
        raise typer.BadParameter(
            "needs a timezone, e.g. 2026-03-01T09:00:00Z or +01:00", param_hint="--start"
        )
    return ts


def _kafka_brokers(settings: Settings) -> str:
    if settings.kafka_brokers:
        return settings.kafka_brokers
    from worldmm import stack

    try:
        return stack.resolve_urls(settings).kafka_brokers
    except stack.StackError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def gateway(
    user: str = typer.Option(..., "--user", help="Wearer's user id (the Kafka key)."),
    session: str = typer.Option(..., "--session", help="Session id."),
    video: Path | None = typer.Option(None, "--video", help="A video file (decoded with PyAV)."),
    frames: Path | None = typer.Option(
        None, "--frames", help="A directory of images, taken in name order."
    ),
    audio: Path | None = typer.Option(
        None, "--audio", help="Audio file (WAV; others via PyAV). Default: the video's track."
    ),
    fps: float = typer.Option(1.0, "--fps", min=0.01, help="Frames per second to send."),
    start: str | None = typer.Option(
        None,
        "--start",
        help="Capture time of the first frame (ISO, with timezone). "
        "Default: now with --realtime, else so that the session ends now.",
    ),
    realtime: bool = typer.Option(False, "--realtime", help="Pace sending by capture time."),
    chunk_s: float = typer.Option(5.0, "--audio-chunk-s", min=0.1, help="Audio chunk length."),
) -> None:
    """Send a recording as a glasses session: frames, audio chunks and session start/end."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from connectors import codec
    from connectors.gateway import (
        BrokerUnavailable,
        GatewayInputError,
        GlassesProducer,
        plan_recording,
        run_gateway,
    )
    from connectors.kafka_io import DeliveryError
    from worldmm.cli.common import settings_or_exit

    if (video is None) == (frames is None):
        typer.echo("error: give exactly one of --video FILE or --frames DIR", err=True)
        raise typer.Exit(2)
    for name, value in (("--user", user), ("--session", session)):
        if not codec.SAFE_ID_RE.fullmatch(value) or value in (".", ".."):
            typer.echo(f"error: {name} {value!r} must match {codec.SAFE_ID_RE.pattern}", err=True)
            raise typer.Exit(2)
    start_ts = _parse_start(start)
    settings = settings_or_exit()
    try:
        plan = plan_recording(
            video=video,
            frames_dir=frames,
            audio=audio,
            fps=fps,
            start=start_ts,
            realtime=realtime,
            max_side=settings.max_frame_side,
            chunk_s=chunk_s,
        )
    except GatewayInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    brokers = _kafka_brokers(settings)
    producer = GlassesProducer(settings.model_copy(update={"kafka_brokers": brokers}))
    try:
        producer.check()
    except BrokerUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None

    typer.echo(
        f"session {session} of {user}: {plan.duration_s:.0f}s from {plan.start.isoformat()} "
        f"→ {brokers} ({'realtime' if realtime else 'as fast as possible'})"
    )
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=False) as bar:
        f_task = bar.add_task("frames", total=plan.n_frames)
        a_task = bar.add_task(
            "audio ", total=plan.n_audio_chunks or None, visible=bool(plan.n_audio_chunks)
        )

        def advance(kind: str) -> None:
            bar.advance(f_task if kind == "frames" else a_task)

        try:
            stats = run_gateway(
                producer,
                user=user,
                session=session,
                start=plan.start,
                frames=plan.frames,
                audio=plan.audio,
                realtime=realtime,
                on_item=advance,
            )
        except GatewayInputError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except DeliveryError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: the session was ended where it stopped", err=True)
            raise typer.Exit(130) from None
        bar.update(f_task, total=stats.frames, completed=stats.frames)
    typer.echo(
        f"sent {stats.frames} frames, {stats.audio_chunks} audio chunks, {stats.control} control "
        f"messages ({stats.bytes_sent / 1e6:.1f} MB) in {stats.wall_s:.1f}s"
    )


# --- (further ingest commands follow) --------------------------------------------------------
