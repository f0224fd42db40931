"""CLI commands: ingest (see apps/cli/__init__.py for the registration order).

Each command is one function below; ``register`` attaches them. Heavy imports (Kafka,
PyAV, Bytewax) happen inside the commands.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from apps.cli.common import parse_time
from worldmm.settings import Settings


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.command("gateway")(gateway)
    app.command("dataflow")(dataflow)
    app.command("replay")(replay)
    app.command("retrigger")(retrigger)


# --- gateway ---------------------------------------------------------------------------------


def _kafka_brokers(settings: Settings) -> str:
    """The configured brokers, else the running embedded broker's (exits 2 when neither)."""
    from apps.cli.common import service_settings

    return settings.kafka_brokers or service_settings("kafka").kafka_brokers or ""


def _session_time(value: str, start: datetime, option: str) -> datetime:
    """An ISO time, or ``<seconds>s`` after the session's start."""
    if value.endswith("s") and value[:-1].replace(".", "", 1).isdigit():
        return start + timedelta(seconds=float(value[:-1]))
    ts = parse_time(value, option)
    assert ts is not None
    return ts


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
    pause_at: list[str] | None = typer.Option(
        None,
        "--pause-at",
        help="Privacy pause from this time (ISO with timezone, or seconds into the session "
        "like 90s); repeatable. Captures from then until --resume-at (or the session's end) "
        "are dropped by the flow, unstored.",
    ),
    resume_at: list[str] | None = typer.Option(
        None, "--resume-at", help="End of a privacy pause (same forms); repeatable."
    ),
) -> None:
    """Send a recording as a glasses session: frames, audio chunks and session start/end."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from apps.cli.common import settings_or_exit
    from apps.gateway.recording import GatewayInputError, plan_recording
    from apps.gateway.send import run_gateway
    from connectors import codec
    from connectors.gateway import BrokerUnavailable, GlassesProducer
    from connectors.kafka_io import DeliveryError

    if (video is None) == (frames is None):
        typer.echo("error: give exactly one of --video FILE or --frames DIR", err=True)
        raise typer.Exit(2)
    for name, value in (("--user", user), ("--session", session)):
        if not codec.SAFE_ID_RE.fullmatch(value) or value in (".", ".."):
            typer.echo(f"error: {name} {value!r} must match {codec.SAFE_ID_RE.pattern}", err=True)
            raise typer.Exit(2)
    start_ts = parse_time(start, "--start")
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

    pauses = [(_session_time(t, plan.start, "--pause-at"), False) for t in pause_at or []]
    pauses += [(_session_time(t, plan.start, "--resume-at"), True) for t in resume_at or []]
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
                pauses=pauses,
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


def _flow_settings() -> Settings:
    from apps.cli.common import service_settings

    return service_settings("kafka", "postgres")


def dataflow(
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Worker threads per process."),
    process_id: int | None = typer.Option(
        None, "--process-id", "-i", help="This process's index in a cluster (with --addresses)."
    ),
    addresses: str | None = typer.Option(
        None, "--addresses", "-a", help="All processes' host:port, separated by ';'."
    ),
    recovery_dir: Path | None = typer.Option(
        None,
        "--recovery-dir",
        help="Bytewax recovery partitions (created when empty). Default: STATE_DIR/recovery.",
    ),
    no_recovery: bool = typer.Option(
        False, "--no-recovery", help="Run without snapshots (a restart re-reads every topic)."
    ),
    recovery_partitions: int = typer.Option(
        1, "--recovery-partitions", min=1, help="Partitions to create in an empty recovery dir."
    ),
    to_end: bool = typer.Option(
        False, "--to-end", help="Stop at the current end of the topics instead of tailing."
    ),
    epoch_s: float = typer.Option(10.0, "--epoch-s", min=0.1, help="Snapshot interval."),
) -> None:
    """Run the ingest dataflow (Kafka → windows → memory) until stopped."""
    from datetime import timedelta

    from bytewax._bytewax import cli_main
    from bytewax.recovery import RecoveryConfig, init_db_dir

    from dataflows.ingest import build_flow
    from worldmm.redact import configure_logging

    settings = _flow_settings()
    configure_logging(settings.log_level)
    recovery = None
    if recovery_dir is None and not no_recovery:
        recovery_dir = settings.resolved_state_dir / "recovery"
    if recovery_dir is not None and not no_recovery:
        recovery_dir.mkdir(parents=True, exist_ok=True)
        if not any(recovery_dir.iterdir()):
            init_db_dir(recovery_dir, recovery_partitions)
        recovery = RecoveryConfig(str(recovery_dir))
    addr_list = [a for a in (addresses or "").split(";") if a] or None
    if (addr_list is None) != (process_id is None):
        raise typer.BadParameter("--process-id and --addresses go together")
    flow = build_flow(settings, tail=not to_end, process_id=process_id or 0)
    cli_main(
        flow,
        workers_per_process=workers,
        process_id=process_id,
        addresses=addr_list,
        epoch_interval=timedelta(seconds=epoch_s),
        recovery_config=recovery,
    )


# Replays read history the codec's live age limit would refuse; a century is "no limit".
_REPLAY_MAX_AGE_S = 100 * 365 * 86400.0


# The time range of replay and retrigger: [--from, --to)
_From = Annotated[
    str | None,
    typer.Option("--from", "--start", help="From this time (ISO, with timezone)."),
]
_To = Annotated[
    str | None,
    typer.Option("--to", "--end", help="Until this time (ISO, with timezone; not included)."),
]


def _range(start: str | None, end: str | None) -> tuple[datetime | None, datetime | None]:
    lo, hi = parse_time(start, "--from"), parse_time(end, "--to")
    if lo is not None and hi is not None and hi <= lo:
        raise typer.BadParameter("--to must be after --from", param_hint="--to")
    return lo, hi


def replay(
    user: str | None = typer.Option(None, "--user", help="Only this user's memory."),
    start: _From = None,
    end: _To = None,
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="First delete the user's memory built from the range (needs --user; only when "
        "the topics still hold that range: retention may have dropped it).",
    ),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Worker threads."),
) -> None:
    """Re-read the topics from the beginning to their current end and rebuild the memory
    (every write is keyed by user + scale + window start, so this is idempotent). Invalid
    records are counted, not sent to the DLQ again; failed windows are."""
    from bytewax._bytewax import cli_main

    from connectors.codec import to_epoch_ms
    from dataflows.ingest import ReplaySelection, build_flow
    from worldmm.redact import configure_logging

    lo, hi = _range(start, end)
    if fresh and user is None:
        raise typer.BadParameter("--fresh needs --user", param_hint="--fresh")
    settings = _flow_settings().model_copy(update={"max_past_age_s": _REPLAY_MAX_AGE_S})
    configure_logging(settings.log_level)
    if fresh:
        from worldmm.memory.rebuild import forget_derived
        from worldmm.store.db import Database

        with Database(settings.database_url, max_size=1) as db:
            counts = forget_derived(db, user, lo, hi)
        typer.echo(f"deleted before the rebuild: {counts}")
    selection = ReplaySelection(
        user, None if lo is None else to_epoch_ms(lo), None if hi is None else to_epoch_ms(hi)
    )
    flow = build_flow(
        settings,
        tail=False,
        flow_id="worldmm_replay",
        select=selection,
        resend_bad_records=False,
    )
    cli_main(flow, workers_per_process=workers)


def retrigger(
    user: str = typer.Option(..., "--user", help="Whose windows to re-run."),
    session: str | None = typer.Option(None, "--session", help="Only this session."),
    start: _From = None,
    end: _To = None,
    force: bool = typer.Option(
        False, "--force", help="Re-run complete windows too (e.g. after a model change)."
    ),
    visual: bool = typer.Option(
        False,
        "--visual",
        help="Only encode the clip embeddings left pending (GPU worker was down); no window "
        "is re-run.",
    ),
) -> None:
    """Re-run pending/failed windows, their stored parents, and pending clip embeddings,
    from stored captures."""
    import asyncio

    from worldmm.deps import build_deps
    from worldmm.memory.rebuild import retrigger as run_retrigger

    lo, hi = _range(start, end)
    settings = _flow_settings()
    deps = build_deps(settings, role="ingest")
    try:
        result = asyncio.run(
            run_retrigger(
                deps,
                user,
                session_id=session,
                start=lo,
                end=hi,
                force=force,
                visual_only=visual,
            )
        )
    finally:
        deps.close()
    failed = [o for o in result.windows if o.status == "failed"]
    typer.echo(
        f"re-ran {len(result.windows)} windows ({len(failed)} failed); clip embeddings: "
        f"{result.visual_done} done, {result.visual_still_pending} still pending"
    )
    for o in failed:
        typer.echo(f"  failed {o.key}: {o.error}", err=True)
    if failed or (visual and result.visual_still_pending):
        raise typer.Exit(1)
