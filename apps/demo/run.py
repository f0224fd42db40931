"""`worldmm demo`: the whole path on the embedded stack, in six steps.

[1] stack up, migrate, topics → [2] generate a glasses session (drawn frames, spoken lines)
→ [3] the gateway sends it to Kafka → [4] the ingest dataflow (a child process reading the
topics to their end) builds the memory; segment counts per scale are shown as they land →
[5] the query API (a child process) answers questions over HTTP → [6] stop what was started
(everything but the stack and the API with ``keep``) and say where the data is.

A failing step names itself and the reason, everything started is stopped, and the exit
code is 1.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import SecretStr
from rich.console import Console
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from apps.demo import procs
from apps.demo.answers import AnswerView, render_answer
from apps.demo.script import (
    DemoQuestion,
    aligned_start,
    demo_questions,
    demo_script,
    expected_windows,
)
from apps.demo.speech import place_kept_speech
from worldmm.models import SCALES
from worldmm.redact import redact
from worldmm.settings import Settings

N_STEPS = 6
DEMO_TOPIC_PREFIX = "worldmm.demo."
SCALE_NAMES = {30: "30 s", 180: "3 min", 600: "10 min", 3600: "1 h"}


class StepFailed(RuntimeError):
    """A step could not finish; the message says why."""


@dataclass
class DemoOptions:
    minutes: float = 5.0
    keep: bool = False
    seed: int = 7
    kept_speech: bool = False  # use the kept recordings even when espeak-ng is there
    questions: int = 5  # at most; only those about scenes the session holds are asked
    ingest_timeout_s: float | None = None  # None: 4 s per second of session, at least 600 s
    api_ready_timeout_s: float = 180.0
    query_timeout_s: float = 180.0


@dataclass
class DemoResult:
    exit_code: int = 1
    failed_step: str | None = None
    error: str | None = None
    user_id: str = ""
    session_id: str = ""
    start: datetime | None = None
    segments: dict[int, int] = field(default_factory=dict)  # complete segments per scale
    answers: list[AnswerView] = field(default_factory=list)
    started_pids: dict[str, int] = field(default_factory=dict)  # every process we started
    api_url: str | None = None
    api_key: str | None = None
    admin_key_made: bool = False  # the demo made the admin key (none was configured)
    database_url: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


class _Run:
    """One demo run: the steps share the settings, the children and the result."""

    def __init__(self, settings: Settings, options: DemoOptions, console: Console) -> None:
        self.settings = settings
        self.stack_settings = settings  # without the resolved URLs: `down` stops embedded ones
        self.options = options
        self.console = console
        self.result = DemoResult()
        self.stack_started = False
        self.own_topics = False  # topics under worldmm.demo.: earlier runs' may be deleted
        self.dataflow: procs.Child | None = None
        self.api: procs.Child | None = None
        self.t0 = time.monotonic()

    # --- display ---------------------------------------------------------------------------

    @contextmanager
    def step(self, n: int, title: str) -> Iterator[None]:
        self.console.print(f"[bold cyan][{n}/{N_STEPS}][/] {title}")
        started = time.monotonic()
        try:
            yield
        except BaseException as exc:
            self.result.failed_step = f"[{n}/{N_STEPS}] {title}"
            self.result.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise
        took = time.monotonic() - started
        self.result.timings[title] = round(took, 1)
        self.console.print(f"      [green]done[/] in {took:.1f}s")

    def note(self, text: str) -> None:
        # soft_wrap: paths, URLs and commands stay whole lines (copyable) in any width
        self.console.print(f"      {text}", soft_wrap=True)

    # --- [1] ---------------------------------------------------------------------------------

    def stack_up(self) -> None:
        from connectors.topics import create_topics
        from deploy import stack
        from deploy.stack.manager import STATE_FILE
        from worldmm.store.migrate import apply_migrations

        kept = procs.stop_kept_api(self.settings)
        if kept is not None:
            self.note(f"stopped the API an earlier `demo --keep` left running (pid {kept})")
        urls = stack.up(self.settings)
        state = json.loads((self.settings.resolved_state_dir / STATE_FILE).read_text())
        for name, record in state.items():
            if isinstance(record, dict) and record.get("started"):
                self.stack_started = True
                self.result.started_pids[name] = int(record["pid"])
        self.settings = self.settings.model_copy(
            update={
                "kafka_brokers": urls.kafka_brokers,
                "database_url": urls.database_url,
                "redis_url": urls.redis_url or "none",
            }
        )
        self.result.database_url = urls.database_url
        self.note(f"kafka {urls.kafka_brokers}, postgres {redact(urls.database_url)}")
        self.note(
            f"redis {urls.redis_url or 'off'}"
            + ("" if self.stack_started else " (already running: left as it is)")
        )
        apply_migrations(urls.database_url, self.settings)
        if self.own_topics:
            old = delete_old_demo_topics(urls.kafka_brokers, self.settings.topic_prefix)
            if old:
                self.note(f"deleted {len(old)} topics of earlier demo runs")
        outcome = create_topics(urls.kafka_brokers, self.settings)
        self.note(f"topics {', '.join(sorted(outcome))}")

    # --- [2] ---------------------------------------------------------------------------------

    def generate(self) -> tuple[object, list[DemoQuestion]]:
        from apps.demo.synthetic import espeak_available, generate_session

        total_s = round(self.options.minutes * 60)
        script = demo_script(total_s)
        start = aligned_start(total_s)
        self.result.start = start
        stamp = start.strftime("%Y%m%d-%H%M")
        self.result.session_id = f"s-{stamp}"
        out_root = self.settings.resolved_state_dir / "demo"
        shutil.rmtree(out_root, ignore_errors=True)  # only the latest demo's input is kept
        out = out_root / self.result.session_id
        speech = espeak_available() and not self.options.kept_speech
        if not speech:
            self.note(
                "speech: the recordings kept in apps/demo/speech/ "
                "(espeak-ng " + ("not used)" if espeak_available() else "is missing)")
            )
        with self._bar() as bar:
            task = bar.add_task("frames", total=total_s)
            files = generate_session(
                out,
                minutes=total_s / 60,
                fps=1.0,
                start=start,
                script=script,
                seed=self.options.seed,
                audio=speech,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        if not speech:
            wav = place_kept_speech(files.scenes, start, total_s, out / "audio.wav")
            files = files.model_copy(update={"audio_wav": wav})
        end = start + timedelta(seconds=total_s)
        self.note(
            f"user {self.result.user_id}, session {self.result.session_id}: "
            f"{start:%H:%M:%S}–{end:%H:%M:%S} UTC, {files.n_frames} frames, "
            f"{len(script)} scenes, in {out}"
        )
        for scene in files.scenes:
            said = " / ".join(line.text for line in scene.spoken)
            self.note(f"  {scene.start:%H:%M:%S} {scene.spec.sign:<15} {said}")
        return files, demo_questions(len(script), self.options.questions)

    # --- [3] ---------------------------------------------------------------------------------

    def send(self, files) -> None:
        from apps.gateway.recording import plan_recording
        from apps.gateway.send import run_gateway
        from connectors.gateway import GlassesProducer

        plan = plan_recording(
            frames_dir=files.frames_dir,
            audio=files.audio_wav,
            fps=files.fps,
            start=files.start,
            max_side=self.settings.max_frame_side,
        )
        producer = GlassesProducer(self.settings)
        producer.check()
        with self._bar() as bar:
            tasks = {
                "frames": bar.add_task("frames", total=plan.n_frames),
                "audio": bar.add_task(
                    "audio ", total=plan.n_audio_chunks or None, visible=bool(plan.n_audio_chunks)
                ),
            }
            stats = run_gateway(
                producer,
                user=self.result.user_id,
                session=self.result.session_id,
                start=plan.start,
                frames=plan.frames,
                audio=plan.audio,
                on_item=lambda kind: bar.advance(tasks[kind]),
            )
        del producer  # no client thread left behind
        self.note(
            f"sent {stats.frames} frames, {stats.audio_chunks} audio chunks and "
            f"{stats.control} control messages ({stats.bytes_sent / 1e6:.1f} MB) "
            f"to {self.settings.topic('frames').rsplit('.', 1)[0]}.*"
        )

    # --- [4] ---------------------------------------------------------------------------------

    def ingest(self, duration_s: float) -> None:
        from worldmm.store.db import Database

        assert self.result.start is not None
        expected = expected_windows(self.result.start, duration_s)
        # The demo's wearer gets its API key after ingest (step 5): its stream makes it.
        flow_settings = self.settings.model_copy(update={"ingest_create_users": True})
        self.dataflow = procs.start_dataflow(flow_settings)
        self.result.started_pids["dataflow"] = self.dataflow.pid
        self.note(f"dataflow pid {self.dataflow.pid}, log {self.dataflow.log_file}")
        # The API loads its models while the dataflow works; step 5 waits for it.
        self.start_api()
        timeout_s = self.options.ingest_timeout_s or max(600.0, 4 * duration_s)
        deadline = time.monotonic() + timeout_s
        counts: dict[int, tuple[int, int]] = {}
        with (
            Database(self.settings.database_url, max_size=1, name="worldmm-demo") as db,
            self._counts_display(expected) as show,
        ):
            while True:
                with db.connection() as conn:
                    counts = _segment_counts(conn, self.result.user_id)
                show(counts)
                if not self.dataflow.running():
                    break
                if time.monotonic() > deadline:
                    raise StepFailed(
                        f"the dataflow did not finish in {timeout_s:.0f}s "
                        f"(log {self.dataflow.log_file})"
                    )
                time.sleep(1.0)
        code = self.dataflow.proc.returncode
        if code != 0:
            raise StepFailed(
                f"the dataflow exited with code {code} (log "
                f"{self.dataflow.log_file}):\n{self.dataflow.log_tail()}"
            )
        self.result.segments = {s: counts.get(s, (0, 0))[0] for s in SCALES}
        failed = {s: n - done for s, (done, n) in counts.items() if n > done}
        if failed or self.result.segments != expected:
            raise StepFailed(
                f"segments per scale {self.result.segments}, expected {expected}"
                + (f"; not complete: {failed}" if failed else "")
                + f" (log {self.dataflow.log_file})"
            )

    @contextmanager
    def _counts_display(
        self, expected: dict[int, int]
    ) -> Iterator[Callable[[dict[int, tuple[int, int]]], None]]:
        """A live table on a terminal; elsewhere (logs, CI) one line per change."""
        if self.console.is_terminal:
            with Live(
                self._counts_table({}, expected), console=self.console, refresh_per_second=4
            ) as live:
                yield lambda counts: live.update(self._counts_table(counts, expected))
            return
        last: list[str] = []

        def show(counts: dict[int, tuple[int, int]]) -> None:
            line = "segments complete: " + ", ".join(
                f"{SCALE_NAMES[s]} {counts.get(s, (0, 0))[0]}/{expected[s]}" for s in SCALES
            )
            if line not in last:
                last[:] = [line]
                self.note(line)

        yield show

    def _counts_table(self, counts: dict[int, tuple[int, int]], expected: dict[int, int]) -> Table:
        table = Table(box=None, padding=(0, 2), show_edge=False)
        table.add_column("      scale")
        table.add_column("segments complete", justify="right")
        for scale in SCALES:
            done = counts.get(scale, (0, 0))[0]
            mark = "[green]✓[/]" if done >= expected[scale] else ""
            table.add_row(f"      {SCALE_NAMES[scale]}", f"{done}/{expected[scale]} {mark}")
        return table

    # --- [5] ---------------------------------------------------------------------------------

    def start_api(self) -> None:
        configured = self.settings.admin_api_key
        self.result.admin_key_made = configured is None
        admin_key = (
            secrets.token_urlsafe(24) if configured is None else configured.get_secret_value()
        )
        # model_copy does not validate: the key must already be a SecretStr
        self.settings = self.settings.model_copy(update={"admin_api_key": SecretStr(admin_key)})
        host = self.settings.api_host
        port = procs.pick_port(host, self.settings.api_port)
        self.api = procs.start_api(self.settings, host, port, detached=self.options.keep)
        self.result.started_pids["api"] = self.api.pid
        self.result.api_url = f"http://{host}:{port}"
        self.note(
            f"query API starting in the background: pid {self.api.pid}, "
            f"{self.result.api_url}, log {self.api.log_file}"
        )

    def ask(self, questions: list[DemoQuestion]) -> None:
        from apps.client import ApiError, WorldMMClient

        if self.api is None:
            self.start_api()
        assert self.api is not None and self.result.api_url is not None
        admin_key = self.settings.admin_api_key.get_secret_value()  # type: ignore[union-attr]
        url = self.result.api_url
        timeout = self.options.query_timeout_s
        with WorldMMClient(url, admin_key, timeout_s=timeout) as admin:
            procs.wait_ready(
                self.api,
                lambda: _ready(url),
                timeout_s=self.options.api_ready_timeout_s,
                what="the query API",
            )
            try:
                key = admin.create_user(self.result.user_id).api_key
            except ApiError as exc:
                raise StepFailed(f"creating the demo user's API key: {exc}") from None
        self.result.api_key = key
        self.note(f"API key for {self.result.user_id} created (POST /v1/users)")
        with WorldMMClient(url, key, self.result.user_id, timeout_s=timeout) as mm:
            for i, q in enumerate(questions, 1):
                started = time.monotonic()
                try:
                    reply = mm.query(q.question, choices=q.choices or None)
                except ApiError as exc:
                    raise StepFailed(f"question {i}: {exc}") from None
                view = AnswerView.from_reply(
                    q, reply.model_dump(mode="json"), time.monotonic() - started
                )
                self.result.answers.append(view)
                self.console.print(render_answer(i, view, self.result.start))

    # --- [6] ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop what this run started (idempotent; runs after a failure too)."""
        from deploy import stack

        if self.dataflow is not None:
            self.dataflow.stop()
        if self.api is not None and not (self.options.keep and self.result.failed_step is None):
            self.api.stop()
            (self.settings.resolved_state_dir / procs.API_PID_FILE).unlink(missing_ok=True)
        if self.stack_started and not (self.options.keep and self.result.failed_step is None):
            stack.down(self.stack_settings)

    def where(self) -> None:
        s, r = self.settings, self.result
        lines = [f"state dir   {s.resolved_state_dir.absolute()} (stack data, logs)"]
        if not self.stack_settings.database_url:
            pg_data = self.stack_settings.postgres_data_parent / "postgres" / "data"
            lines.append(f"postgres    {pg_data} (the memory of user {r.user_id})")
        lines.append(f"blob store  {s.resolved_blob_dir.absolute()}/frames/{r.user_id}/")
        lines.append(f"demo input  {(s.resolved_state_dir / 'demo').absolute()}")
        if self.options.keep and r.failed_step is None and r.api_url:
            # The keys shown are the ones this run made for the person who ran it (as
            # `keys create` shows a new key once); a configured admin key is never printed.
            admin = (
                s.admin_api_key.get_secret_value()
                if s.admin_api_key and r.admin_key_made
                else "(WORLDMM_ADMIN_API_KEY)"
            )
            body = '{"question": "Where did I put the mug?"}'
            lines += [
                f"\nThe stack and the query API (pid {r.started_pids.get('api')}) keep running.",
                f"  API        {r.api_url}/docs   database {redact(s.database_url or '')}",
                f"  user key   {r.api_key}   (user {r.user_id})",
                f"  admin key  {admin}",
                f"  curl -s -X POST {r.api_url}/v1/users/{r.user_id}/query \\",
                f"       -H 'Authorization: Bearer {r.api_key}' \\",
                f"       -H 'Content-Type: application/json' -d '{body}'",
            ]
            lines.append(
                f"  worldmm ask --api {r.api_url} --key {r.api_key} "
                f"--user {r.user_id} 'What did Alice say?'"
            )
            lines.append(f"  WORLDMM_API_KEY={r.api_key} worldmm mcp --api {r.api_url}  (MCP)")
            lines.append("  stop them: worldmm demo --stop")
        for line in lines:  # soft_wrap: paths and commands stay whole (copyable)
            self.console.print(line, soft_wrap=True, markup=False, highlight=False)

    def browser_line(self) -> None:
        """The last line of a good run: where to look at the memory in a browser."""
        url = self.result.api_url
        if url is None:
            return
        if self.options.keep:
            line = f"memory browser: {url}/ui/ (log in with the user key above)"
        else:
            line = (
                f"memory browser: {url}/ui/ (stopped with this run: "
                "`worldmm demo --keep` keeps it up)"
            )
        self.console.print(line, soft_wrap=True, markup=False, highlight=False)

    def _bar(self) -> Progress:
        return Progress(
            "      [progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )


def _segment_counts(conn, user_id: str) -> dict[int, tuple[int, int]]:
    """Scale → (complete, all) segments of ``user_id``."""
    rows = conn.execute(
        "SELECT scale_seconds, count(*) FILTER (WHERE processing_status = 'complete'), count(*)"
        " FROM segments WHERE user_id = %s GROUP BY scale_seconds",
        (user_id,),
    ).fetchall()
    return {int(s): (int(done), int(n)) for s, done, n in rows}


def _ready(url: str) -> bool:
    """One readiness probe (no retries: wait_ready does the polling)."""
    from apps.client import ApiError, RetryPolicy, WorldMMClient

    with WorldMMClient(url, "readiness-probe", timeout_s=2.0, retry=RetryPolicy(0)) as probe:
        try:
            probe.ready()
        except ApiError:
            return False
    return True


def demo_settings(settings: Settings, run_id: str) -> Settings:
    """Topics of this run only, ``worldmm.demo.<run>.*`` (unless a prefix was configured):
    the dataflow reads its topics from the beginning, so it must not find earlier runs'
    sessions there; and a short lateness, as the whole session arrives at once."""
    update: dict[str, object] = {"allowed_lateness_s": min(settings.allowed_lateness_s, 5.0)}
    if _own_topics(settings):
        update["topic_prefix"] = f"{DEMO_TOPIC_PREFIX}{run_id}."
    return settings.model_copy(update=update)


def _own_topics(settings: Settings) -> bool:
    return settings.topic_prefix == Settings.model_fields["topic_prefix"].default


def delete_old_demo_topics(brokers: str, keep_prefix: str, timeout_s: float = 30.0) -> list[str]:
    """Delete the topics of earlier demo runs (their memory is in PostgreSQL already)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": brokers})
    old = [
        name
        for name in admin.list_topics(timeout=timeout_s).topics
        if name.startswith(DEMO_TOPIC_PREFIX) and not name.startswith(keep_prefix)
    ]
    for future in admin.delete_topics(old, operation_timeout=timeout_s).values() if old else ():
        future.result(timeout_s)
    return old


def run_demo(
    settings: Settings,
    options: DemoOptions | None = None,
    console: Console | None = None,
) -> DemoResult:
    """Run the six steps; never raises for a failed step (see ``DemoResult.exit_code``)."""
    options = options or DemoOptions()
    console = console or Console()
    run_id = secrets.token_hex(3)
    run = _Run(demo_settings(settings, run_id), options, console)
    run.result.user_id = f"demo-{run_id}"
    run.own_topics = _own_topics(settings)
    total_s = round(options.minutes * 60)
    console.print(
        f"[bold]WorldMM Live demo[/]: a {total_s / 60:.1f}-minute glasses session "
        f"through Kafka, the dataflow and the query API"
    )
    try:
        with run.step(1, "Start the embedded stack, migrate, create topics"):
            run.stack_up()
        with run.step(2, "Generate a glasses session (drawn frames, spoken lines)"):
            files, questions = run.generate()
        with run.step(3, "Send it through the gateway to Kafka"):
            run.send(files)
        with run.step(4, "Build the memory with the ingest dataflow"):
            run.ingest(total_s)
        with run.step(5, "Ask questions through the query API"):
            run.ask(questions)
        run.result.exit_code = 0
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]")
        run.result.exit_code = 130
    except Exception as exc:  # noqa: BLE001 - reported with the failing step, then cleaned up
        run.result.exit_code = 1
        if run.result.failed_step is None:
            run.result.failed_step = "setup"
            run.result.error = f"{type(exc).__name__}: {exc}"
    finally:
        with _quiet_step(
            run,
            6,
            "Stop what the demo started"
            + (" (the stack and the API keep running)" if options.keep else ""),
        ):
            run.stop()
    if run.result.failed_step is not None:
        console.print(f"[bold red]FAILED[/] at {run.result.failed_step}: {run.result.error}")
    run.where()
    run.result.timings["total"] = round(time.monotonic() - run.t0, 1)
    if run.result.exit_code == 0:
        console.print(f"[bold green]demo finished[/] in {run.result.timings['total']:.0f}s")
        run.browser_line()
    return run.result


@contextmanager
def _quiet_step(run: _Run, n: int, title: str) -> Iterator[None]:
    """The stop step: reported like the others, but its own failure must not hide the
    step that failed first."""
    run.console.print(f"[bold cyan][{n}/{N_STEPS}][/] {title}")
    try:
        yield
    except Exception as exc:  # noqa: BLE001
        run.console.print(f"      [red]stopping failed[/]: {type(exc).__name__}: {exc}")
        run.result.exit_code = run.result.exit_code or 1
        run.result.failed_step = run.result.failed_step or f"[{n}/{N_STEPS}] {title}"
        run.result.error = run.result.error or str(exc)


def stop_kept(settings: Settings, echo: Callable[[str], None]) -> None:
    """``worldmm demo --stop``: stop the API a kept demo left running, then the stack."""
    from deploy import stack

    pid = procs.stop_kept_api(settings)
    echo(f"query API {'stopped (pid ' + str(pid) + ')' if pid else 'was not running'}")
    stopped = stack.down(settings)
    echo(
        "stack: "
        + ", ".join(f"{k} {'stopped' if v else 'not running'}" for k, v in stopped.items())
    )
