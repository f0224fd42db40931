"""Windows of different users are built concurrently: a slow model adds latency, not time.

The real flow (build_flow + run_main) and the real construction (process_window, PostgreSQL
writes) run with a simulated model whose every call awaits 0.5 s. The calls' own recorded
start/end times decide: run one after another, their span would be at least the sum of
their durations; run together, it is close to one call's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bytewax.testing import TestingSink, TestingSource, run_main

from bench.ingest_sim import HashEmbedder, SimulatedRoles, small_jpeg
from connectors import codec
from dataflows.ingest import RawRecord, build_flow
from tests.fixtures.calls import CallLog, max_overlap
from worldmm.blobs import LocalBlobStore
from worldmm.deps import Deps

pytestmark = pytest.mark.integration

START = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)
LATENCY_S = 0.5
USERS = 8


def _records(users: list[str]) -> list[RawRecord]:
    """Frames every 2 s from START to START+34 s per user: with 4 s lateness the input's end
    closes exactly the first 30 s window of each user (and no coarser one)."""
    out: list[RawRecord] = []
    for k in range(18):
        for u, user in enumerate(users):
            key, value, headers = codec.encode_frame(
                user, "s1", START + timedelta(seconds=2 * k), k, small_jpeg(u * 100 + k)
            )
            out.append(RawRecord("frames", "t.frames", key, value, headers, 0, len(out)))
    return out


def _simulated_deps(settings, log: CallLog, blobs: Path, pool: int, encoder=None) -> Deps:
    """Deps whose model calls are simulated: each awaits LATENCY_S and is logged."""
    from worldmm.store.db import Database

    return Deps(
        settings=settings,
        db=Database(settings.database_url, max_size=pool),
        roles=SimulatedRoles(LATENCY_S, log.add),
        embedder=HashEmbedder(settings.text_embed_dim),
        transcriber=None,
        encoder=encoder,
        blobs=LocalBlobStore(blobs),
    )


def test_windows_of_different_users_overlap(settings, tmp_path: Path) -> None:
    from worldmm.store.db import Database
    from worldmm.store.segments import get_segment_by_window

    users = [f"conc-{tmp_path.name[-12:]}-{i}" for i in range(USERS)]
    settings = settings.model_copy(
        update={
            "allowed_lateness_s": 4.0,
            "in_flight_start": 16,
            "max_past_age_s": 20 * 365 * 86400.0,
        }
    )
    log = CallLog()
    holder: list[Deps] = []

    def deps_factory(s):
        deps = _simulated_deps(s, log, tmp_path / "blobs", pool=8)
        holder.append(deps)
        return deps

    outcomes: list = []
    flow = build_flow(
        settings,
        source=TestingSource(_records(users)),
        dlq_sink=TestingSink([]),
        report_sink=TestingSink(outcomes),
        deps_factory=deps_factory,
        session_writer=lambda deps, msg: None,
    )
    try:
        run_main(flow)
    finally:
        for d in holder:
            d.close()

    assert sorted((o.user_id, o.scale_s, o.status) for o in outcomes) == [
        (u, 30, "complete") for u in sorted(users)
    ]
    captions = log.of("caption")
    assert len(captions) == USERS
    # Serialised, the captions alone would span at least the sum of their durations.
    span = max(c.end for c in captions) - min(c.start for c in captions)
    assert span < 0.5 * sum(c.duration for c in captions), (span, captions)
    assert max_overlap(captions) >= USERS // 2
    # Each window makes three chained calls (caption → NER → triples); all windows together
    # take about one chain, far below USERS chains end to end.
    calls = log.calls
    total = max(c.end for c in calls) - min(c.start for c in calls)
    chain = sum(c.duration for c in calls) / USERS
    assert total < 2 * chain, (total, chain)

    with Database(settings.database_url, max_size=1) as db, db.connection() as conn:
        for u in users:
            seg = get_segment_by_window(conn, u, 30, START)
            assert seg is not None and seg.processing_status == "complete" and seg.caption


async def test_clip_encoding_runs_beside_the_text_chain(settings, user_id, tmp_path) -> None:
    """The visual encoder needs only the frames: its call starts with the window instead of
    waiting for caption → NER → triples."""
    from bench.ingest_sim import SimulatedEncoder
    from tests.fixtures.windows import frame_window
    from worldmm.memory.window_status import process_window

    log = CallLog()
    encoder = SimulatedEncoder(settings.visual_embed_dim, LATENCY_S, log.add)
    deps = _simulated_deps(settings, log, tmp_path / "blobs", pool=2, encoder=encoder)
    try:
        outcome = await process_window(deps, frame_window(deps.blobs, user_id, START, 10))
    finally:
        deps.close()
    assert outcome.status == "complete" and outcome.visual_status == "complete"
    (caption,), (encode,) = log.of("caption"), log.of("encode_video")
    # it starts with the window, before the caption call (which waits for keyframes and OCR)
    # and long before NER and triples: a chain would start it after the caption ended
    assert encode.start < caption.start < caption.end
