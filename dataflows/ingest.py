"""The ingest dataflow: Kafka frames/audio/control → windows → memory in PostgreSQL.

    python -m bytewax.run dataflows.ingest:flow            # settings from WORLDMM_* env
    worldmm dataflow --workers 2 --recovery-dir /var/lib/worldmm/recovery

Steps (DESIGN.md §3): ``decode`` (invalid → ``dlq`` with a reason; the flow never crashes
on input) → ``sessions`` (session rows of control messages) → ``key_user`` → ``windows``
(event-time cascade per user, worldmm.memory.windows; captures carry their bytes, spooled at
each snapshot) → ``construct`` (the window's captures stored as one container, then
concurrent model calls and writes) → ``report`` (log + metrics) and window failures, blob
store failures included (``store_failed``), → ``dlq``. The module attribute ``flow`` is
built on first access, so importing reads no config.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.inputs import Source
from bytewax.outputs import DynamicSink, Sink, StatelessSinkPartition

from connectors import codec
from connectors.dlq import DlqRecord, message_dlq_record, window_dlq_record
from dataflows import ingest_metrics
from dataflows.construct_step import AsyncRunner, Process, construct_builder, run_event
from dataflows.known_users import KnownUsers
from dataflows.window_step import window_builder
from worldmm.blobs import audio_key, frame_key
from worldmm.deps import Deps, build_deps
from worldmm.media.spool import WindowSpool
from worldmm.memory.late_and_control import record_session
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.windows import (
    BASE_S,
    Item,
    Pause,
    SessionEnd,
    WindowConfig,
    dt_to_ms,
    ms_to_dt,
)
from worldmm.redact import configure_logging
from worldmm.settings import Settings, load_settings
from worldmm.store.db import Database
from worldmm.store.outage import retry_while_down

log = logging.getLogger("worldmm.dataflow.ingest")


@dataclass(frozen=True)
class RawRecord:
    """One input record, independent of the Kafka client (tests build these directly)."""

    kind: str  # frames | audio | control
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class SessionStart:
    session_id: str
    ts_ms: int


@dataclass(frozen=True)
class ReplaySelection:
    """Which valid messages a replay rebuilds: one user's (or everyone's) captures overlapping
    [start_ms, end_ms). Control messages of the user always pass: a session end is what
    flushes the last windows, wherever the range ends."""

    user_id: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None

    def __call__(self, msg: codec.Message) -> bool:
        if self.user_id is not None and msg.user_id != self.user_id:
            return False
        if isinstance(msg, codec.ControlMessage):
            return True
        first = msg.ts_ms
        last = first + msg.duration_ms if isinstance(msg, codec.AudioMessage) else first + 1
        if self.start_ms is not None and last <= self.start_ms:
            return False
        return self.end_ms is None or first < self.end_ms


class _Shared:
    """Per-process lazily built dependencies + async runner (shared by worker threads)."""

    def __init__(
        self,
        settings: Settings,
        deps_factory: Callable[[Settings], Deps],
        process: Process = run_event,
    ) -> None:
        self.settings = settings
        self.deps_factory = deps_factory
        self.process = process
        self._lock = threading.Lock()
        self._deps: Deps | None = None
        self._runner: AsyncRunner | None = None

    def deps(self) -> Deps:
        with self._lock:
            if self._deps is None:
                self._deps = ingest_metrics.timed_deps(self.deps_factory(self.settings))
            return self._deps

    def runner(self) -> AsyncRunner:
        deps = self.deps()
        with self._lock:
            if self._runner is None:
                self._runner = AsyncRunner(
                    deps,
                    self.settings.in_flight_start,
                    self.process,
                    self.settings.in_flight_max,
                )
            return self._runner

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
        if self._deps is not None:
            self._deps.close()


# --- steps (plain functions, unit-testable) -------------------------------------------------


def decode_record(
    rec: RawRecord, limits: codec.CodecLimits, now: Callable[[], datetime]
) -> codec.Message | DlqRecord:
    try:
        return codec.decode(rec.kind, rec.key, rec.value, rec.headers, now=now(), limits=limits)
    except codec.InvalidMessage as exc:
        return _dlq_for(rec, exc.reason, exc.detail, now())


def _dlq_for(rec: RawRecord, reason: str, detail: str, at: datetime) -> DlqRecord:
    return message_dlq_record(
        reason=reason,
        source_topic=rec.topic,
        source_partition=rec.partition,
        source_offset=rec.offset,
        key=rec.key,
        value=rec.value,
        headers=rec.headers,
        failed_at=at,
        detail=detail,
    )


def blob_of(msg: codec.Message) -> tuple[str, bytes] | None:
    """The blob a capture is stored as (idempotent key, bytes); None for control messages."""
    if isinstance(msg, codec.FrameMessage):
        return frame_key(msg.user_id, msg.session_id, msg.ts, msg.seq), msg.jpeg
    if isinstance(msg, codec.AudioMessage):
        return audio_key(msg.user_id, msg.session_id, msg.ts), codec.as_wav(msg)
    return None


def window_input(msg: codec.Message) -> tuple[str, Item | SessionEnd | SessionStart | Pause]:
    """What the window step keeps of a message: its capture's key, metadata and bytes (the
    bytes go to the window's container when it closes, and to its spool before that)."""
    if isinstance(msg, codec.ControlMessage):
        if msg.event == "session_end":
            last = tuple(sorted((msg.last_ms or {}).items()))
            return msg.user_id, SessionEnd(msg.session_id, msg.ts_ms, last)
        if msg.event in ("pause", "resume"):
            return msg.user_id, Pause(msg.session_id, msg.ts_ms, resume=msg.event == "resume")
        return msg.user_id, SessionStart(msg.session_id, msg.ts_ms)
    blob = blob_of(msg)
    assert blob is not None
    key, data = blob
    if isinstance(msg, codec.FrameMessage):
        ref = CaptureRef(key, seq=msg.seq, data=data)
        return msg.user_id, Item("frames", key, msg.session_id, msg.ts_ms, msg.ts_ms, ref)
    ref = CaptureRef(
        key,
        sample_rate=msg.sample_rate,
        duration_ms=msg.duration_ms,
        content_type="audio/wav",
        data=data,
    )
    end = msg.ts_ms + msg.duration_ms
    return msg.user_id, Item("audio", key, msg.session_id, msg.ts_ms, end, ref)


def outcome_dlq(
    outcome: WindowOutcome, now: datetime, settings: Settings, spool: WindowSpool | None = None
) -> list[DlqRecord]:
    """The DLQ records of a failed window: the window (retrigger or retry it), and each of
    its captures no row points at, whole; a late capture whose store failed goes whole, as
    the record it came in (re-producing it to its topic retries it)."""
    reason = outcome.reason or "window_failed"
    error = outcome.error or ""
    if outcome.capture is not None:
        return [capture_dlq(outcome.user_id, outcome.capture, error, now, settings, reason)]
    records = [
        window_dlq_record(
            reason=reason,
            user_id=outcome.user_id,
            scale_seconds=outcome.scale_s,
            window_start=ms_to_dt(outcome.start_ms),
            failed_at=now,
            error=error,
            extra={
                "attempts": outcome.attempts,
                "segment_id": outcome.segment_id,
                "captures_on_dlq": len(outcome.unrecorded),
            },
        )
    ]
    spooled: dict[str, bytes] | None = None
    for item in outcome.unrecorded:
        data = getattr(item.ref, "data", None)
        if data is None and spool is not None:
            if spooled is None:
                spooled = spool.read(outcome.user_id, outcome.start_ms)
            data = spooled.get(item.ref.blob_key)
        if data is None:  # neither carried nor spooled: the window's record names it
            log.error("dlq_capture_missing user=%s key=%s", outcome.user_id, item.ref.blob_key)
            continue
        item = replace(item, ref=replace(item.ref, data=data))
        records.append(capture_dlq(outcome.user_id, item, error, now, settings, reason))
    return records


def capture_dlq(
    user_id: str,
    item: Item,
    error: str,
    now: datetime,
    settings: Settings,
    reason: str = "store_failed",
) -> DlqRecord:
    """A capture as a message record (``reason``: why it could not be kept otherwise): key,
    value and headers of a record of its topic that carries it."""
    ref, ts = item.ref, ms_to_dt(item.ts_ms)
    if item.kind == "frames":
        record = codec.encode_frame(user_id, item.session_id, ts, ref.seq, ref.data)
    else:
        record = codec.encode_audio(
            user_id,
            item.session_id,
            ts,
            ref.data,
            duration_ms=item.end_ms - item.ts_ms,
            sample_rate=ref.sample_rate,
        )
    key, value, headers = record
    return message_dlq_record(
        reason=reason,
        source_topic=settings.topic(item.kind),
        source_partition=None,
        source_offset=None,
        key=key,
        value=value,
        headers=headers,
        failed_at=now,
        detail=error,
    )


def _count_dlq(step_id: str, record: DlqRecord) -> None:
    kind, reason = record.header("dlq_kind") or "?", record.header("reason") or "?"
    ingest_metrics.DLQ_RECORDS.labels(kind, reason).inc()
    log.warning("dlq kind=%s reason=%s detail=%s", kind, reason, record.header("detail"))


def _count_known_bad(step_id: str, record: DlqRecord) -> None:
    log.info(
        "bad_record_skipped reason=%s topic=%s offset=%s (already on the DLQ from the live run)",
        record.header("reason"),
        record.header("source_topic"),
        record.header("source_offset"),
    )


# --- sinks --------------------------------------------------------------------------------


def _count_window(step_id: str, o: WindowOutcome) -> None:
    """Metrics of every finished window (whatever sink reports it; late captures included)."""
    scale = str(o.scale_s)
    if o.status == "late":
        ingest_metrics.LATE_CAPTURES.inc()
    else:
        ingest_metrics.WINDOW_DURATION.labels(scale).observe(o.duration_s)
        lag_s = (time.time() * 1000 - (o.start_ms + o.scale_s * 1000)) / 1000
        ingest_metrics.CLOSE_TO_QUERYABLE.labels(scale).observe(max(lag_s, 0.0))
    ingest_metrics.WINDOWS.labels(scale, o.status).inc()  # last: a scrape never sees it alone


class _LogPartition(StatelessSinkPartition[WindowOutcome]):
    def write_batch(self, items: list[WindowOutcome]) -> None:
        for o in items:
            log.info(
                "window_%s user=%s scale=%s start=%s partial=%s segment=%s attempts=%s "
                "duration_s=%.2f counts=%s error=%s",
                o.status,
                o.user_id,
                o.scale_s,
                ms_to_dt(o.start_ms).isoformat(),
                o.partial,
                o.segment_id,
                o.attempts,
                o.duration_s,
                o.counts,
                o.error,
            )


class LogSink(DynamicSink[WindowOutcome]):
    """Structured log line per finished window (the data itself is already in PostgreSQL)."""

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _LogPartition:
        return _LogPartition()


def _kafka_dlq_sink(settings: Settings) -> Sink[DlqRecord]:
    from connectors.topics import topic_names
    from dataflows.dlq_sink import DlqSink

    if not settings.kafka_brokers:
        raise ValueError("WORLDMM_KAFKA_BROKERS is not set (run `worldmm up` or point it at Kafka)")
    return DlqSink(
        settings.kafka_brokers, topic_names(settings)["dlq"], settings.dlq_max_record_bytes
    )


def user_gate(
    known: KnownUsers, now: Callable[[], datetime]
) -> Callable[[list[tuple[RawRecord, codec.Message]]], list[Any]]:
    """The batch step that keeps records of users the database knows; the others become
    DLQ records (``unknown_user``). One read per batch for ids not answered lately."""

    def gate(pairs: list[tuple[RawRecord, codec.Message]]) -> list[Any]:
        ids = {msg.user_id for _, msg in pairs}
        users = retry_while_down(lambda: known.known(ids), what="known_users")
        out: list[Any] = []
        for rec, msg in pairs:
            if msg.user_id in users:
                out.append((rec, msg))
            else:
                detail = (
                    f"user {msg.user_id!r} is not known (create it first, or set "
                    "WORLDMM_INGEST_CREATE_USERS=true)"
                )
                out.append(_dlq_for(rec, codec.UNKNOWN_USER, detail, now()))
        return out

    return gate


def _known_users(database: Callable[[], Database]) -> KnownUsers:
    from worldmm.store.users import existing_users

    def lookup(ids: list[str]) -> set[str]:
        with database().connection() as conn:
            return existing_users(conn, ids)

    return KnownUsers(lookup)


def _window_floor(database: Callable[[], Database]) -> Callable[[str], int]:
    """Where a user's built windows end, for a window state made afresh (live flow)."""
    from worldmm.store.segments import last_window_end

    def floor(user_id: str) -> int:
        def read() -> int:
            with database().connection() as conn:
                end = last_window_end(conn, user_id, BASE_S)
            return 0 if end is None else dt_to_ms(end)

        return retry_while_down(read, what="window_floor")

    return floor


def _kafka_input(
    flow: Dataflow,
    settings: Settings,
    tail: bool,
    database: Callable[[], Database],
    lag: ingest_metrics.LagTracker | None = None,
) -> Stream[RawRecord]:
    from connectors.topics import topic_names
    from dataflows.input_gaps import CheckedKafkaSource, GapRecorder
    from dataflows.kafka_source import SourceRecord

    if not settings.kafka_brokers:
        raise ValueError("WORLDMM_KAFKA_BROKERS is not set (run `worldmm up` or point it at Kafka)")
    names = topic_names(settings)
    kinds = {names[k]: k for k in ("frames", "audio", "control")}
    # main's paced source, its positions checked against the broker (dataflows.input_gaps)
    # lost input is logged, counted and stored per wearer and span (its windows marked)
    on_gap = GapRecorder(database, round(settings.allowed_lateness_s * 1000))
    source = CheckedKafkaSource(
        settings.kafka_brokers, list(kinds), tail=tail, batch_size=500, on_gap=on_gap
    )
    raw = op.input("kafka_in", flow, source)

    def to_raw(m: SourceRecord) -> RawRecord:
        if lag is not None:
            lag.seen(m.topic, m.partition, m.offset)
        return RawRecord(kinds[m.topic], m.topic, m.key, m.value, m.headers, m.partition, m.offset)

    return op.map("kafka_records", raw, to_raw)


# --- the flow -------------------------------------------------------------------------------


def build_flow(
    settings: Settings,
    *,
    source: Source[RawRecord] | None = None,
    dlq_sink: Sink[DlqRecord] | None = None,
    report_sink: Sink[WindowOutcome] | None = None,
    deps_factory: Callable[[Settings], Deps] = partial(build_deps, role="ingest"),
    process: Process = run_event,
    session_writer: Callable[[Deps, codec.ControlMessage], None] = record_session,
    clock: Callable[[], float] = time.time,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    tail: bool = True,
    flow_id: str = "worldmm_ingest",
    select: Callable[[codec.Message], bool] | None = None,
    resend_bad_records: bool = True,
    process_id: int = 0,
    known_users: KnownUsers | None = None,
) -> Dataflow:
    """The ingest flow. Kafka in/out by default; tests pass a source, sinks and fake deps.

    ``tail=False`` reads the topics to their current end and then stops (after finishing
    every window that end closes): bounded replays and tests stop deterministically.
    ``select`` keeps only the valid messages it accepts (a replay of one user or time range).
    ``resend_bad_records=False`` counts and logs invalid input without producing it to the
    DLQ again (a replay: the live flow already put those records there); window failures
    always go to the DLQ. Unless ``ingest_create_users`` is set, only records of users the
    database knows pass (``known_users``: which; by default read from the database). With
    Kafka input the process serves its metrics on ``dataflow_metrics_port + process_id``.
    """
    shared = _Shared(settings, deps_factory, process)
    if source is None:
        # Load models and open the pool now, before the Kafka consumers start: against a
        # broker that answers fetches at once (the embedded one) they keep a core busy, and
        # a lazy first import of torch under that load took 90 s instead of 6 s. A bad
        # setting or an unreachable database also fails here, at start, not at the first
        # message.
        shared.runner()
    limits = codec.CodecLimits.from_settings(settings)
    flow = Dataflow(flow_id)
    if source is not None:
        records = op.input("records_in", flow, source)
    else:
        # A real process: serve /metrics and follow the consumer lag of what it reads.
        port = settings.dataflow_metrics_port
        ingest_metrics.serve(port + process_id if port else 0, settings.dataflow_metrics_host)
        lag = ingest_metrics.lag_tracker(settings.kafka_brokers) if port else None
        records = _kafka_input(flow, settings, tail, lambda: shared.deps().db, lag)

    decoded = op.map("decode", records, lambda r: (r, decode_record(r, limits, now)))
    split = op.branch("valid", decoded, lambda pair: not isinstance(pair[1], DlqRecord))
    bad = op.map("bad_records", split.falses, lambda pair: pair[1])
    valid = split.trues
    if select is not None:
        valid = op.filter("select", valid, lambda pair: select(pair[1]))
    if not settings.ingest_create_users:
        # a user id is the sender's claim: only users the API made are served
        users = known_users if known_users is not None else _known_users(lambda: shared.deps().db)
        known = user_gate(users, now)
        gated = op.branch(
            "known_user",
            op.flat_map_batch("users", valid, known),
            lambda x: not isinstance(x, DlqRecord),
        )
        valid = gated.trues
        bad = op.merge("bad_or_unknown", bad, gated.falses)

    def record_sessions(pairs: list[tuple[RawRecord, codec.Message]]) -> list[Any]:
        """Session rows for control messages; a session write that fails goes to the DLQ.
        Captures pass on with their bytes (stored when their window closes)."""
        out: list[Any] = []
        for rec, msg in pairs:
            if isinstance(msg, codec.ControlMessage):
                try:
                    # a database outage holds the flow here until the server is back
                    retry_while_down(lambda m=msg: session_writer(shared.deps(), m), what="session")
                except OSError as exc:
                    out.append(_dlq_for(rec, "store_failed", f"{type(exc).__name__}: {exc}", now()))
                    continue
            out.append(window_input(msg))
        return out

    stored = op.flat_map_batch("sessions", valid, record_sessions)
    stored_split = op.branch("stored", stored, lambda x: not isinstance(x, DlqRecord))
    windowed_in = op.filter(
        "drop_session_start", stored_split.trues, lambda pair: not isinstance(pair[1], SessionStart)
    )
    keyed = op.key_on("key_user", windowed_in, lambda pair: pair[0])
    config = WindowConfig.from_settings(settings)
    if not tail:
        # A bounded run reads to the end anyway: session ends wait for their data or for EOF,
        # never for wall time (a loaded machine must not turn a replay's frames late).
        config = replace(config, session_end_grace_s=math.inf)
    spool = WindowSpool(settings.resolved_spool_dir)
    # A live flow drops idle wearers' state; made again, it starts where their built
    # windows end. A bounded run (a replay) rebuilds what it reads, wherever that lies.
    floor = _window_floor(lambda: shared.deps().db) if tail and source is None else None
    windows = op.stateful_batch("windows", keyed, window_builder(config, clock, spool, floor))
    construct = construct_builder(shared.runner, spool)
    outcomes = op.key_rm("outcomes", op.stateful_batch("construct", windows, construct))
    failed = op.filter("failed_windows", outcomes, lambda o: o.status == "failed")
    window_dlq = op.flat_map("window_dlq", failed, lambda o: outcome_dlq(o, now(), settings, spool))
    if resend_bad_records:
        dlq = op.merge("dlq_records", bad, stored_split.falses, window_dlq)
    else:
        op.inspect("count_known_bad", bad, _count_known_bad)
        dlq = op.merge("dlq_records", stored_split.falses, window_dlq)
    dlq = op.inspect("count_dlq", dlq, _count_dlq)

    op.output("dlq_out", dlq, dlq_sink or _kafka_dlq_sink(settings))
    outcomes = op.inspect("count_windows", outcomes, _count_window)
    op.output("report", outcomes, report_sink or LogSink())
    return flow


def __getattr__(name: str) -> Dataflow:
    """``dataflows.ingest:flow`` for ``python -m bytewax.run``: built from WORLDMM_* settings
    when first asked for (importing the module reads nothing)."""
    if name == "flow":
        configure_logging(logging.INFO)
        return build_flow(load_settings())
    raise AttributeError(name)
