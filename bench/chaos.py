"""Chaos benchmark: wearers stream and query while every server is SIGKILLed and restarted on
a seeded schedule (:mod:`bench.chaos_targets`), then the memory is checked against the windows
the stream implies and a fault-free replay (:mod:`bench.chaos_checks`); docs/benchmarks/chaos.md."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from pydantic import Field, SecretStr, field_validator

from bench import chaos_checks as checks
from bench import harness
from bench.chaos_targets import TARGETS, ChaosStack
from bench.harness import Echo, StrList
from bench.ingest_sim import AUDIO_CHUNK_S, Wearers, ten_minute_start
from worldmm.settings import Settings


class ChaosConfig(harness.Options):
    users: int = Field(8, description="Simulated wearers streaming at once.")
    minutes: float = Field(10.0, description="Real-time stream per wearer (a multiple of 0.5).")
    seed: int = Field(0, description="Seed of the fault schedule and frames.")
    faults_per_target: int = Field(
        2, description="Kills of each target (worker, kafka, postgres, redis, encoder)."
    )
    targets: StrList = Field(TARGETS, description="Comma-separated subset of the targets.")
    model_latency_s: float = Field(0.2, description="Simulated latency of every model call (s).")
    keep: bool = Field(False, description="Keep the run's temp dir (logs, data).")
    fuzz_dir: Path | None = Field(
        None, description="Fuzz counts to include (tests/fuzz, WORLDMM_FUZZ_REPORT_DIR)."
    )
    down_s: tuple[float, float] = (1.0, 4.0)  # how long a killed target stays down
    lead_s: float = 10.0  # fault-free stream before the first fault
    tail_s: float = 15.0  # ... and after the last one is due
    query_interval_s: float = 1.0
    drain_s: float = 180.0  # after the session ends, how long windows may take
    allowed_lateness_s: float = 5.0

    @field_validator("targets")
    @classmethod
    def _known(cls, targets: tuple[str, ...]) -> tuple[str, ...]:
        if unknown := set(targets) - set(TARGETS):
            raise ValueError(f"unknown targets {sorted(unknown)}; choose from {list(TARGETS)}")
        return targets

    @property
    def stream_s(self) -> int:
        return int(round(self.minutes * 60 / 30)) * 30


@dataclass(frozen=True)
class Fault:
    target: str
    at_s: float  # seconds after the stream started
    down_s: float


def fault_schedule(cfg: ChaosConfig) -> list[Fault]:
    """Each target ``faults_per_target`` times in a seeded random order, one fault per equal
    slot of the stream, in the first half of its slot (the rest is room to recover)."""
    rng = random.Random(cfg.seed)
    order = [t for t in cfg.targets for _ in range(cfg.faults_per_target)]
    rng.shuffle(order)
    if not order:
        return []
    slot = (cfg.stream_s - cfg.lead_s - cfg.tail_s) / len(order)
    if slot < cfg.down_s[1]:  # a fault must fit its slot with room to come back
        raise ValueError(
            f"the stream is too short for {len(order)} faults: raise --minutes or lower"
            " --faults-per-target"
        )
    out = []
    for i, target in enumerate(order):
        at = cfg.lead_s + i * slot + rng.uniform(0, slot / 2)
        out.append(Fault(target, round(at, 2), round(rng.uniform(*cfg.down_s), 2)))
    return out


# "remember this" notes whose facts overlap and contradict, for the note users
NOTES = ("I like tea.", "I dislike tea.", "I like coffee.", "I like tea.", "I dislike coffee.")


class QueryLoad(threading.Thread):
    """One request every ``interval_s``, to the API processes in turn, round-robin over the
    users of ``keys``: segment listings, every fifth a question; or, with ``notes``, a
    "remember this" note each time (each user's notes consolidated by both API processes in
    turn). Counts statuses; 503s must carry Retry-After."""

    def __init__(
        self, api_urls: list[str], keys: dict[str, str], interval_s: float, notes: bool
    ) -> None:
        super().__init__(name="chaos-notes" if notes else "chaos-queries", daemon=True)
        self.api_urls, self.keys, self.interval_s, self.notes = api_urls, keys, interval_s, notes
        self.statuses: Counter[str] = Counter()
        self.missing_retry_after = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        users, i = list(self.keys), 0
        with httpx.Client(timeout=15.0) as client:
            while not self.stop_event.wait(self.interval_s):
                client.base_url = httpx.URL(self.api_urls[i % len(self.api_urls)])
                user = users[(i // 2 if self.notes else i) % len(users)]
                path, auth = f"/v1/users/{user}", {"Authorization": f"Bearer {self.keys[user]}"}
                ask = {"question": "Who did I talk with?", "max_rounds": 1}
                try:
                    if self.notes:
                        note = {"text": NOTES[i % len(NOTES)]}
                        r = client.post(f"{path}/memories", json=note, headers=auth)
                    elif i % 5 == 4:
                        r = client.post(f"{path}/query", json=ask, headers=auth)
                    else:
                        r = client.get(f"{path}/segments", params={"limit": 20}, headers=auth)
                    self.statuses[str(r.status_code)] += 1
                    if r.status_code == 503 and "retry-after" not in r.headers:
                        self.missing_retry_after += 1
                except httpx.HTTPError as exc:
                    self.statuses[f"connection_error:{type(exc).__name__}"] += 1
                i += 1


class FaultRunner(threading.Thread):
    """Applies the schedule: kill, stay down, restart, wait until the target answers."""

    def __init__(self, stack: ChaosStack, faults: list[Fault], t0: float, echo: Echo) -> None:
        super().__init__(name="chaos-faults", daemon=True)
        self.stack, self.faults, self.t0, self.echo = stack, faults, t0, echo
        self.done: list[dict[str, Any]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for f in self.faults:
                time.sleep(max(0.0, self.t0 + f.at_s - time.monotonic()))
                killed_at = time.monotonic()
                self.stack.kill(f.target)
                self.echo(f"  fault: {f.target} killed at {killed_at - self.t0:.1f}s")
                time.sleep(f.down_s)
                self.stack.restart(f.target)
                answering = self.stack.wait_answering(f.target, timeout_s=120)
                recovered = round(time.monotonic() - killed_at, 2) if answering else None
                at_s = round(killed_at - self.t0, 2)
                self.done.append(
                    {"target": f.target, "at_s": at_s, "down_s": f.down_s, "recovered_s": recovered}
                )
                self.echo(f"  fault: {f.target} answering again after {recovered}s")
        except BaseException as exc:  # noqa: BLE001 - re-raised by the main thread
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"fault runner failed: {self.error!r}") from self.error


def _create_users(api_url: str, admin_key: str, users: list[str]) -> dict[str, str]:
    auth = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=api_url, timeout=30.0, headers=auth) as client:
        created = [client.post("/v1/users", json={"user_id": u}) for u in users]
    return {u: r.raise_for_status().json()["api_key"] for u, r in zip(users, created, strict=True)}


def _stream(stack: ChaosStack, cfg: ChaosConfig, users: list[str], t0: datetime, echo: Echo):
    """Real-time frames and audio for every user while the faults are applied, then the
    session ends; returns the fault runner."""
    from connectors.gateway import GlassesProducer

    with GlassesProducer(stack.settings, message_timeout_ms=600_000) as producer:
        for name in users:
            producer.start_session(name, "s1", t0)
        producer.flush(120)
        runner = FaultRunner(stack, fault_schedule(cfg), time.monotonic(), echo)
        runner.start()

        def at(k: int) -> None:
            runner.check()
            if k % 10 == 0:
                echo(f"  streamed {k}/{cfg.stream_s}s")

        Wearers(users, cfg.seed).stream(producer, t0, cfg.stream_s, at, frames_s=cfg.stream_s)
        end = t0 + timedelta(seconds=cfg.stream_s)
        last_ms = {
            "frames": int((end - timedelta(seconds=1)).timestamp() * 1000),
            "audio": int(end.timestamp() * 1000),
        }
        for name in users:
            producer.end_session(name, "s1", end, last_ms)
        producer.flush(300)
    return runner


def _wait_drained(database_url: str, expected: set, timeout_s: float, echo: Echo) -> float:
    """Until every implied window is complete or failed (or the timeout); returns seconds."""
    from worldmm.store.db import Database

    users = sorted({k[0] for k in expected})
    query = (
        "SELECT count(*) FROM segments WHERE user_id = ANY(%s)"
        " AND processing_status IN ('complete', 'failed')"
    )
    t0 = time.monotonic()
    with Database(database_url, max_size=1) as db:
        while time.monotonic() - t0 < timeout_s:
            try:
                with db.connection() as conn:
                    if conn.execute(query, (users,)).fetchone()[0] >= len(expected):
                        break
            except Exception:  # noqa: BLE001 - a late restart; keep waiting
                pass
            time.sleep(1.0)
    waited = time.monotonic() - t0
    echo(f"  drained in {waited:.1f}s")
    return waited


# What the worker logged about the faults (outages waited out, not failures): the report's
# name -> the log event counted.
WORKER_LOG_EVENTS = {
    "db_unavailable_waits_logged": "db_unavailable",
    "encoder_unavailable": "encoder_unavailable",
    "window_failed_attempts": "window_failed",
    "kafka_errors": "kafka_error",
    "input_gaps_not_stored": "input_gap_not_stored",
}


def _reference_run(settings: Settings) -> str:
    """The same topics, read to their end by the same flow with no faults (and instant
    simulated models: latency does not change what is built) into a second database on the
    same server; returns its URL."""
    import psycopg
    from bytewax.testing import TestingSink, run_main

    from bench.ingest_worker import simulated_deps
    from dataflows.ingest import build_flow
    from worldmm.store.migrate import apply_migrations

    name = "worldmm_chaos_ref"
    server = (settings.database_url or "").rsplit("/", 1)[0]
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    ref = settings.model_copy(
        update={
            "database_url": f"{server}/{name}",
            "redis_url": "none",
            "gpu_worker_url": None,
            "ingest_create_users": True,  # a new database: nobody made its wearers there
        }
    )
    apply_migrations(ref.database_url, ref)
    flow = build_flow(
        ref,
        tail=False,
        dlq_sink=TestingSink([]),  # the live run's DLQ already holds them
        deps_factory=lambda s: simulated_deps(s, 0.0),
        flow_id="worldmm_chaos_reference",
    )
    run_main(flow)
    return ref.database_url


def run_chaos(base: Settings, cfg: ChaosConfig, echo: Echo) -> dict[str, Any]:
    """One chaos run on its own stack; the report (see the module docstring)."""
    from connectors.topics import topic_names

    run, run_id = harness.Run(), uuid.uuid4().hex[:8]
    root = Path(tempfile.mkdtemp(prefix=f"worldmm-chaos-{run_id}-"))
    root.chmod(0o755)  # PostgreSQL runs as another OS user when we are root
    admin_key = "chaos-admin-" + uuid.uuid4().hex
    base = base.model_copy(
        update={
            "admin_api_key": SecretStr(admin_key),
            "allowed_lateness_s": cfg.allowed_lateness_s,
            "max_past_age_s": max(base.max_past_age_s, 3 * 3600.0),
            "in_flight_start": 64,
            "ocr_frames": 0,  # pixels only: OCR made clips time out on a busy machine
            "gpu_timeout_s": 15.0,
            "gpu_max_retries": 1,
            "gpu_breaker_reset_s": 5.0,
            "topic_partitions": 1,
        }
    )
    stack = ChaosStack(root, base, cfg.model_latency_s, run_id)
    users = [f"chaos-{run_id}-u{u:02d}" for u in range(cfg.users)]
    note_users = [f"chaos-{run_id}-notes{n}" for n in range(2)]  # apart: the replay has no notes
    loads: list[QueryLoad] = []
    try:
        echo(f"chaos {run_id}: starting the stack under {root}")
        settings = stack.start()
        url = settings.database_url or ""
        for who, notes in ((users, False), (note_users, True)):
            keys = _create_users(stack.api_url, admin_key, who)
            loads.append(QueryLoad(stack.api_urls, keys, cfg.query_interval_s, notes))
            loads[-1].start()
        t0 = ten_minute_start()
        echo(f"  streaming {cfg.users} users for {cfg.stream_s}s; faults: {fault_schedule(cfg)}")
        runner = _stream(stack, cfg, users, t0, echo)
        runner.join(timeout=300)
        runner.check()
        expected = checks.implied_windows(users, int(t0.timestamp() * 1000), cfg.stream_s * 1000)
        drain_s = _wait_drained(url, expected, cfg.drain_s, echo)
        for load in loads:
            load.stop_event.set()
            load.join(timeout=30)
        stack.check_children()
        log = stack.worker.tail(10**8)
        chaos_mem = checks.fetch_memory(url, users)
        note_facts = checks.fact_integrity(url, note_users)
        lost = checks.input_lost(log, url, users)
        dlq = checks.dlq_by_reason(settings.kafka_brokers or "", topic_names(settings)["dlq"])
        echo("  fault-free replay of the same topics into a second database")
        ref_t0 = time.monotonic()
        ref_mem = checks.fetch_memory(_reference_run(settings), users)
        ref_s = time.monotonic() - ref_t0
    finally:
        for load in loads:
            load.stop_event.set()
        stack.stop()
    queries, note_load = loads
    fuzz = sorted(cfg.fuzz_dir.glob("*.json")) if cfg.fuzz_dir else []
    result = {
        "benchmark": "chaos",
        "windows": checks.window_figures(expected, chaos_mem),
        "reference_windows": checks.window_figures(expected, ref_mem),
        "input_lost": lost,
        "duplicated_entities": int(chaos_mem.duplicated_entities),
        "duplicated_triples": int(chaos_mem.duplicated_triples),
        # active semantic facts held more than once (consolidation should have merged them)
        "inconsistent_facts": sum(n - 1 for n in chaos_mem.semantic_active.values() if n > 1),
        "remembered_notes": {**note_facts, "statuses": dict(note_load.statuses)},
        "against_fault_free_run": checks.compare_with_reference(chaos_mem, ref_mem),
        "visual_status_30s": dict(chaos_mem.visual),
        "dlq_by_reason": dlq,
        "faults": runner.done,
        "queries": {
            "total": sum(queries.statuses.values()),
            "errors_by_status": {k: v for k, v in queries.statuses.items() if k != "200"},
            "ok": queries.statuses.get("200", 0),
            "503_without_retry_after": queries.missing_retry_after,
        },
        "worker_starts": stack.worker.starts,
        "worker_log": {name: log.count(event) for name, event in WORKER_LOG_EVENTS.items()},
        # the fuzz tests' counts (tests/fuzz, run with WORLDMM_FUZZ_REPORT_DIR), if given
        "fuzz": {f.stem: json.loads(f.read_text()) for f in fuzz},
        "drain_s": round(drain_s, 1),
        "reference_run_s": round(ref_s, 1),
        "settings": {
            **cfg.model_dump(mode="json"),
            "stream_s": cfg.stream_s,
            "fps": 1,
            "audio": f"{AUDIO_CHUNK_S} s WAV chunks",
            "model": "simulated (bench/ingest_sim.py); encoder: the real service, offline backend",
        },
    }
    if cfg.keep:
        result["kept_dir"] = str(root)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return run.stamp(result)


@harness.main(ChaosConfig)
def main(cfg: ChaosConfig) -> dict[str, Any]:
    """Stream while every server is SIGKILLed and restarted on a seeded schedule; report
    missing and duplicated windows, entities, triples, DLQ reasons and query statuses."""
    from worldmm.settings import load_settings

    result = run_chaos(load_settings(), cfg, harness.stamped_echo())
    harness.write_report(result, cfg.out)
    return result


if __name__ == "__main__":
    main()
