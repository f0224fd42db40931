"""The query API on a real uvicorn socket over the session's embedded stack, and a small
seeded memory written through the store (no ingest): shared by the browser and MCP tests."""

from __future__ import annotations

import io
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import uvicorn
from PIL import Image

from apps.query_api.app import create_app
from tests.integration.query_api.conftest import seed_segment
from worldmm.blobs import frame_key
from worldmm.deps import Deps, build_deps
from worldmm.settings import Settings, load_settings
from worldmm.store import frames as frame_store
from worldmm.store import segments as segment_store
from worldmm.store.models import FrameRow, SegmentWrite
from worldmm.store.users import create_user

DAY = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ADMIN_KEY = "admin-" + uuid.uuid4().hex


@dataclass
class Served:
    url: str
    deps: Deps
    settings: Settings


def served_settings(stack, root: Path) -> Settings:
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


@contextmanager
def serve_api(stack, root: Path) -> Iterator[Served]:
    settings = served_settings(stack, root)
    deps = build_deps(settings, role="api")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(settings, deps=deps)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:  # uvicorn offers no start callback: poll its flag
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}", deps, settings)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        deps.close()


@dataclass
class Wearer:
    user_id: str
    key: str
    segments: list[int]  # the 30 s segments, in time order
    parent: int  # the 3 min segment over them
    frame_key: str


SCENES = [
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
    ids = []
    for i, (caption, triples) in enumerate(scenes):
        t = start + timedelta(seconds=30 * i)
        ids.append(seed_segment(deps, user_id, t, t + timedelta(seconds=30), caption, triples))
    session = "s1"
    ts = start + timedelta(seconds=5)
    fkey = frame_key(user_id, session, ts, 0)
    deps.blobs.put(fkey, _jpeg((40, 90, 200)))
    with deps.db.transaction() as conn:
        frame_store.insert_frame(
            conn,
            FrameRow(user_id=user_id, session_id=session, captured_at=ts, seq=0, blob_key=fkey),
        )
        parent = segment_store.upsert_segment(
            conn,
            SegmentWrite(
                user_id=user_id,
                scale_seconds=180,
                window_start=start,
                window_end=start + timedelta(seconds=180),
                caption=" ".join(c for c, _ in scenes),
                processing_status="complete",
            ),
        )
        segment_store.link_children(conn, parent, ids)
    return Wearer(user_id, key, ids, parent, fkey)
