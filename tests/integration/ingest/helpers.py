"""Shared pieces of the ingest fault tests: cheap settings, produced sessions, row snapshots.

Cost control (2 shared cores): the offline captioner reads text from one frame per window,
the offline encoder from none, four frames are sampled per window, audio is silent PCM with
ASR off, and windows run one at a time (the adaptive bound pinned at 1) so the order of
entity creation is the same in every run (the comparisons below need that).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from worldmm.settings import Settings

START = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)  # a 10 min boundary; fixed: same OCR output
REPO = Path(__file__).resolve().parents[3]

CHEAP = {
    "allowed_lateness_s": 5.0,
    "in_flight_start": 1,
    "in_flight_max": 1,  # one window at a time: the adaptive bound must not grow
    "asr_backend": "none",
    "ocr_frames": 1,
    "frames_per_window": 4,
    "max_past_age_s": 20 * 365 * 86400.0,  # the fixed start is in the past
}

# Settings passed to a `worldmm` subprocess (as WORLDMM_* variables).
_ENV_FIELDS = (
    "kafka_brokers",
    "database_url",
    "redis_url",
    "topic_prefix",
    "topic_partitions",
    "state_dir",
    "blob_dir",
    "gpu_worker_url",
    "note_merge_span_h",
    *CHEAP,
)


def cheap(settings: Settings, **extra: Any) -> Settings:
    return settings.model_copy(update={**CHEAP, **extra})


def env_for(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDMM_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    for name in _ENV_FIELDS:
        value = getattr(settings, name)
        if value is not None:
            env[f"WORLDMM_{name.upper()}"] = str(value)
    return env


def set_env(monkeypatch, settings: Settings) -> None:
    """For in-process CLI calls (CliRunner): the same variables a subprocess would get."""
    for name, value in env_for(settings).items():
        if name.startswith("WORLDMM_"):
            monkeypatch.setenv(name, value)


def worldmm(args: list[str], settings: Settings, log: Path) -> subprocess.Popen:
    """``worldmm ARGS`` as a child process (its own process group), output to ``log``."""
    out = log.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "apps.cli", *args],
        cwd=REPO,
        env=env_for(settings),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.05):
    """Poll until ``predicate()`` is truthy (returned), or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(poll_s)


# --- sessions --------------------------------------------------------------------------


def session_frames(out_dir: Path, minutes: float, seed: int = 3) -> Path:
    """A generated session's frames (no speech: no espeak-ng needed) plus a silent WAV."""
    from apps.demo.synthetic import generate_session, write_wav

    files = generate_session(out_dir, minutes=minutes, fps=1, start=START, seed=seed, audio=False)
    write_wav(out_dir / "silence.wav", np.zeros(int(minutes * 60 * 16_000), dtype=np.int16))
    return files.frames_dir


def produce_session(settings: Settings, user: str, frames_dir: Path, session: str = "s1") -> int:
    """Send the session through the gateway (start, frames, 5 s audio chunks, end)."""
    from apps.gateway.recording import plan_recording
    from apps.gateway.send import run_gateway
    from connectors.gateway import GlassesProducer

    plan = plan_recording(
        frames_dir=frames_dir, audio=frames_dir.parent / "silence.wav", fps=1, start=START
    )
    with GlassesProducer(settings) as producer:
        stats = run_gateway(
            producer,
            user=user,
            session=session,
            start=START,
            frames=plan.frames,
            audio=plan.audio,
        )
    return stats.frames


def fed_settings(
    settings: Settings, users: Sequence[str], frames_dir: Path, **extra: Any
) -> Settings:
    """:func:`cheap` settings (``extra`` on top) whose topics exist and hold the session in
    ``frames_dir`` for each of ``users``, one after the other."""
    from connectors.topics import create_topics

    settings = cheap(settings, **extra)
    create_topics(settings.kafka_brokers, settings)
    for user in users:
        produce_session(settings, user, frames_dir)
    return settings


def base_count(minutes: float) -> int:
    return int(minutes * 2)


# --- snapshots of what a run built ---------------------------------------------------------


def memory_rows(database_url: str, user: str) -> dict[str, Any]:
    """The user's memory, without ids or wall times, so two runs (or two users fed the same
    input) compare equal when they built the same thing. Duplicates are kept (as counts)."""
    from worldmm.store.db import Database

    with Database(database_url, max_size=1) as db, db.connection() as conn:
        segments = conn.execute(
            "SELECT scale_seconds, window_start, window_end, partial, processing_status,"
            " visual_status, caption, transcript FROM segments WHERE user_id = %s"
            " ORDER BY scale_seconds, window_start",
            (user,),
        ).fetchall()
        entities = conn.execute(
            "SELECT lower(e.surface_form), lower(c.surface_form) FROM entities e"
            " LEFT JOIN entities c ON c.id = e.canonical_entity_id AND c.user_id = e.user_id"
            " WHERE e.user_id = %s",
            (user,),
        ).fetchall()
        triples = conn.execute(
            "SELECT t.memory_type, s.scale_seconds, s.window_start, lower(su.surface_form),"
            " lower(t.predicate), lower(coalesce(ob.surface_form, t.object_literal)),"
            " t.invalidated_at IS NULL"
            " FROM triples t JOIN entities su ON su.id = t.subject_entity_id"
            " LEFT JOIN entities ob ON ob.id = t.object_entity_id"
            " LEFT JOIN segments s ON s.id = t.segment_id"
            " WHERE t.user_id = %s",
            (user,),
        ).fetchall()
        visual = conn.execute(
            "SELECT count(*) FROM visual_embeddings WHERE user_id = %s", (user,)
        ).fetchone()[0]
        frames = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE late) FROM frames WHERE user_id = %s",
            (user,),
        ).fetchone()
    return {
        "segments": [(*r[:2], r[2] - r[1], *r[3:]) for r in segments],
        "entities": Counter(entities),
        "triples": Counter(triples),
        "visual_embeddings": visual,
        "frames": tuple(frames),
    }


def segment_states(database_url: str, user: str, *columns: str) -> dict[tuple, tuple]:
    """(scale, window start) -> (processing_status, error, *columns) of the user's segments."""
    import psycopg

    names = ", ".join(("scale_seconds", "window_start", "processing_status", "error", *columns))
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(f"SELECT {names} FROM segments WHERE user_id = %s", (user,))
        return {(r[0], r[1]): r[2:] for r in rows.fetchall()}


def duplicates(counter: Counter) -> list:
    return [k for k, n in counter.items() if n > 1]


def complete_bases(conn, user: str) -> int:
    return conn.execute(
        "SELECT count(*) FROM segments WHERE user_id = %s AND scale_seconds = 30"
        " AND processing_status = 'complete'",
        (user,),
    ).fetchone()[0]


def window_start(offset_s: float) -> datetime:
    return START + timedelta(seconds=offset_s)
