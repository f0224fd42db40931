"""The query API over the session's embedded stack, for the integration tests: its settings,
the app on a real uvicorn socket, and memory written through the store (no ingest)."""

from __future__ import annotations

import io
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI
from PIL import Image

from query_api.app import create_app
from tests.fixtures.store import make_segment
from worldmm.blobs import frame_key
from worldmm.deps import Deps, build_deps
from worldmm.settings import Settings, load_settings
from worldmm.store import entities as entity_store
from worldmm.store import frames as frame_store
from worldmm.store import segments as segment_store
from worldmm.store import triples as triple_store
from worldmm.store.models import FrameRow, TripleWrite
from worldmm.store.users import create_user

ADMIN_KEY = "admin-" + uuid.uuid4().hex
DAY = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
Triple = tuple[str, str, str]


def api_settings_for(stack, root: Path) -> Settings:
    """An API's settings over the test stack: offline models, its own state and blob dirs."""
    return load_settings(
        state_dir=root / "state",
        blob_dir=root / "blobs",
        kafka_brokers=stack.kafka_brokers,
        database_url=stack.database_url,
        redis_url=stack.redis_url,
        admin_api_key=ADMIN_KEY,
        llm_provider="offline",
        embed_backend="local",
    )


def stack_env(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    """The environment that points a `worldmm` command run in-process at ``settings``' stack."""
    for name, value in {
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "KAFKA_BROKERS": settings.kafka_brokers,
        "STATE_DIR": str(settings.state_dir),
        "BLOB_DIR": str(settings.blob_dir),
        "LLM_PROVIDER": "offline",
    }.items():
        monkeypatch.setenv(f"WORLDMM_{name}", value)


@contextmanager
def on_socket(app: FastAPI) -> Iterator[str]:
    """``app`` under uvicorn (what `worldmm serve` runs) on a free loopback port; its URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:  # uvicorn offers no start callback: poll its flag
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class Served:
    url: str
    deps: Deps
    settings: Settings


@contextmanager
def serve_api(stack, root: Path) -> Iterator[Served]:
    """An API of its own (settings, services, socket) over the test stack."""
    settings = api_settings_for(stack, root)
    deps = build_deps(settings, role="api")
    try:
        with on_socket(create_app(settings, deps=deps)) as url:
            yield Served(url, deps, settings)
    finally:
        deps.close()


def seed_segment(
    deps: Deps,
    user_id: str,
    start: datetime,
    caption: str,
    triples: Sequence[Triple] = (),
    *,
    scale: int = 30,
) -> int:
    """A complete segment of ``scale`` seconds from ``start``, with its entities and episodic
    triples, written through the store."""
    names = sorted({t[0] for t in triples} | {t[2] for t in triples})
    name_vecs = dict(zip(names, deps.embedder.embed(names), strict=True)) if names else {}
    triple_vecs = deps.embedder.embed([" ".join(t) for t in triples]) if triples else []
    with deps.db.transaction() as conn:
        segment_id = make_segment(
            conn, user_id, start, scale, caption=caption, processing_status="complete"
        )
        ids = {
            n: entity_store.insert_canonical_entity(conn, user_id, n, name_vecs[n]).id
            for n in names
        }
        rows = [
            TripleWrite(
                subject_entity_id=ids[s],
                predicate=p,
                object_entity_id=ids[o],
                embedding=np.asarray(v),
            )
            for (s, p, o), v in zip(triples, triple_vecs, strict=True)
        ]
        triple_store.insert_triples(conn, user_id, segment_id, "episodic", rows)
    return segment_id


@dataclass
class Wearer:
    user_id: str
    key: str
    segments: list[int]  # the 30 s segments, in time order
    parent: int  # the 3 min segment over them
    frame_key: str


SCENES: list[tuple[str, list[Triple]]] = [
    (
        "I put my car keys in the blue bowl by the front door.",
        [("I", "put", "car keys"), ("car keys", "in", "blue bowl")],
    ),
    (
        "Maria called about the dentist appointment on Friday.",
        [("Maria", "called about", "dentist appointment")],
    ),
    ("I watered the basil plant on the kitchen window sill.", [("I", "watered", "basil plant")]),
    ("I read the train timetable at the station board.", [("I", "read", "train timetable")]),
]


def _jpeg(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(out, format="JPEG")
    return out.getvalue()


def seed_wearer(deps: Deps, prefix: str, scenes=SCENES, start: datetime = DAY) -> Wearer:
    """A user with a key, four 30 s segments (one with a stored frame) and their 3 min parent."""
    user_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with deps.db.transaction() as conn:
        key = create_user(conn, user_id)
    ids = [
        seed_segment(deps, user_id, start + timedelta(seconds=30 * i), caption, triples)
        for i, (caption, triples) in enumerate(scenes)
    ]
    parent = seed_segment(deps, user_id, start, " ".join(c for c, _ in scenes), scale=180)
    session = "s1"
    ts = start + timedelta(seconds=5)
    fkey = frame_key(user_id, session, ts, 0)
    deps.blobs.put(fkey, _jpeg((40, 90, 200)))
    with deps.db.transaction() as conn:
        frame_store.insert_frame(
            conn,
            FrameRow(user_id=user_id, session_id=session, captured_at=ts, seq=0, blob_key=fkey),
        )
        segment_store.link_children(conn, user_id, parent, ids)
    return Wearer(user_id, key, ids, parent, fkey)
