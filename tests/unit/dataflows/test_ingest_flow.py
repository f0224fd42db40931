"""The ingest flow in memory (TestingSource/TestingSink/run_main) with fake construction."""

from __future__ import annotations

import asyncio
import io
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bytewax.testing import TestingSink, TestingSource, cluster_main, run_main
from PIL import Image

from connectors import codec
from dataflows.ingest import RawRecord, build_flow
from worldmm.blobs import LocalBlobStore
from worldmm.media.spool import WindowSpool
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.windows import BASE_S, BaseWindow, CoarseWindow, LateItem, dt_to_ms
from worldmm.settings import load_settings

START = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)  # a 10 min boundary
NOW = START + timedelta(minutes=30)


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 30)).save(buf, format="JPEG")
    return buf.getvalue()


def _raw(kind: str, record: tuple, offset: int) -> RawRecord:
    key, value, headers = record
    return RawRecord(kind, f"t.{kind}", key, value, headers, 0, offset)


def session_records(user: str, minutes: int = 12, step_s: int = 5) -> list[RawRecord]:
    jpeg = _jpeg()
    pcm = b"\x00\x00" * (16000 * step_s)
    out = []
    for k in range(minutes * 60 // step_s):
        ts = START + timedelta(seconds=k * step_s)
        out.append(_raw("frames", codec.encode_frame(user, "s1", ts, k, jpeg), 2 * k))
        wav = codec.encode_audio(
            user,
            "s1",
            ts,
            codec.wav_bytes(pcm, 16000),
            duration_ms=step_s * 1000,
            sample_rate=16000,
        )
        out.append(_raw("audio", wav, 2 * k + 1))
    end = START + timedelta(minutes=minutes)
    out.append(_raw("control", codec.encode_control(user, "s1", end, "session_end"), 0))
    return out


class FakeDeps:
    def __init__(self, blob_dir: Path) -> None:
        self.blobs = LocalBlobStore(blob_dir)

    def close(self) -> None:
        pass


class Recorder:
    """A fake construction step: sleeps like a model call and records what it saw."""

    def __init__(self, delay_s: float = 0.05, fail: set[tuple[int, int]] | None = None):
        self.delay_s = delay_s
        self.fail = fail or set()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.finished: list = []

    async def __call__(self, deps, event) -> WindowOutcome:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.finished.append(event)
        if isinstance(event, LateItem):
            return WindowOutcome(event.user_id, BASE_S, event.window_start_ms, "late")
        scale = BASE_S if isinstance(event, BaseWindow) else event.scale_s
        if (scale, event.start_ms) in self.fail:
            return WindowOutcome(event.user_id, scale, event.start_ms, "failed", error="boom")
        return WindowOutcome(
            event.user_id, scale, event.start_ms, "complete", partial=event.partial
        )


def run_flow(tmp_path: Path, records: list, recorder: Recorder, workers: int = 1, **settings_kw):
    settings = load_settings(
        state_dir=tmp_path / "state",
        blob_dir=tmp_path / "blobs",
        in_flight_start=8,
        in_flight_max=8,
        allowed_lateness_s=10,
        **settings_kw,
    )
    outcomes: list[WindowOutcome] = []
    dlq: list = []
    sessions: list = []
    flow = build_flow(
        settings,
        session_writer=lambda deps, msg: sessions.append((msg.user_id, msg.event)),
        source=TestingSource(records),
        dlq_sink=TestingSink(dlq),
        report_sink=TestingSink(outcomes),
        deps_factory=lambda s: FakeDeps(tmp_path / "blobs"),
        process=recorder,
        now=lambda: NOW,
    )
    if workers == 1:
        run_main(flow)
    else:
        cluster_main(flow, [], 0, worker_count_per_proc=workers)
    assert sorted(set(sessions)) == sorted(
        {(r.key.decode(), "session_end") for r in records if r.kind == "control" and r.key}
    )
    return outcomes, dlq


def test_twelve_minute_session_cascade_and_dlq(tmp_path: Path) -> None:
    records = session_records("u1")
    good_ts = START + timedelta(seconds=3)
    # malformed input goes to the DLQ with a reason; the flow keeps going
    bad_jpeg = codec.encode_frame("u1", "s1", good_ts, 999, _jpeg())
    records.insert(10, _raw("frames", (bad_jpeg[0], b"not a jpeg", bad_jpeg[2]), 999))
    records.insert(20, _raw("audio", (b"u1", b"\x00\x01", [("user_id", b"u1")]), 1000))
    # a straggler for a window closed long ago: stored and reported, not dropped
    records.insert(-1, _raw("frames", codec.encode_frame("u1", "s1", good_ts, 5000, _jpeg()), 1))
    recorder = Recorder()
    outcomes, dlq = run_flow(tmp_path, records, recorder)

    by_scale: dict[int, list[WindowOutcome]] = {}
    for o in outcomes:
        if o.status != "late":
            by_scale.setdefault(o.scale_s, []).append(o)
    assert {s: len(v) for s, v in by_scale.items()} == {30: 24, 180: 4, 600: 2, 3600: 1}
    assert sum(o.partial for o in by_scale[30]) == 0
    assert [o.partial for o in sorted(by_scale[180], key=lambda o: o.start_ms)] == [
        False,
        False,
        False,
        True,
    ]
    assert [o.partial for o in sorted(by_scale[600], key=lambda o: o.start_ms)] == [False, True]
    assert by_scale[3600][0].partial
    assert [o.status for o in outcomes if o.status == "late"] == ["late"]

    reasons = sorted(r.header("reason") for r in dlq)
    assert reasons == [codec.BAD_JPEG, codec.MISSING_HEADER]
    # every capture reaches construction with its bytes (in memory, or in the window's
    # spool), under its idempotent key; the straggler comes whole as a late item
    spool = WindowSpool(tmp_path / "state" / "spool")
    frames: dict[str, bytes] = {}
    for e in recorder.finished:
        if isinstance(e, BaseWindow):
            spooled = spool.read("u1", e.start_ms)
            for i in e.items:
                if i.kind == "frames":
                    frames[i.key] = i.ref.data or spooled[i.ref.blob_key]
    assert len(frames) == 144 and set(frames.values()) == {_jpeg()}
    assert all(k.startswith("frames/u1/s1/") for k in frames)
    (late,) = [e for e in recorder.finished if isinstance(e, LateItem)]
    assert late.item.ref.data == _jpeg() and late.item.key not in frames
    # parents only start after all their children finished
    order = {
        (e.wid if not isinstance(e, LateItem) else None): i for i, e in enumerate(recorder.finished)
    }
    for e in recorder.finished:
        if isinstance(e, CoarseWindow):
            assert all(order[c] < order[e.wid] for c in e.children)
    assert 1 < recorder.peak <= 8  # concurrent, bounded by in_flight_max


def test_failed_window_goes_to_dlq_and_parent_still_runs(tmp_path: Path) -> None:
    records = session_records("u2", minutes=3)
    failing = (30, dt_to_ms(START + timedelta(seconds=60)))
    outcomes, dlq = run_flow(tmp_path, records, Recorder(fail={failing}))
    assert [(o.scale_s, o.status) for o in outcomes if o.status == "failed"] == [(30, "failed")]
    windows = [r for r in dlq if r.header("dlq_kind") == "window"]
    assert len(windows) == 1 and windows[0].header("window_start") == str(failing[1])
    assert any(o.scale_s == 180 and o.status == "complete" for o in outcomes)


@pytest.mark.parametrize("workers", [1, 2])
def test_users_are_independent(tmp_path: Path, workers: int) -> None:
    users = 3
    records = []
    for u in range(users):
        records += session_records(f"u{u}", minutes=1)
    outcomes, _ = run_flow(tmp_path, records, Recorder(delay_s=0.01), workers=workers)
    for u in range(users):
        mine = [o for o in outcomes if o.user_id == f"u{u}" and o.scale_s == 30]
        assert len(mine) == 2
