"""A hostile gateway against the flow in memory (issue #42): records past every bound go to
the DLQ with their reason while the session around them is built exactly as without them;
no record opens windows for spans nobody recorded; users nobody made are refused."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bytewax.testing import TestingSink, TestingSource, run_main
from PIL import Image

from connectors import codec
from dataflows.ingest import RawRecord, build_flow
from dataflows.known_users import KnownUsers
from tests.fixtures.hostile_records import hostile_records, stranger_frames
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.windows import BASE_S, BaseWindow, LateItem, dt_to_ms
from worldmm.settings import load_settings

START = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)
NOW = START + timedelta(minutes=10)
MINUTES = 2


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 30)).save(buf, format="JPEG")
    return buf.getvalue()


def _raw(kind: str, record, offset: int) -> RawRecord:
    key, value, headers = record
    return RawRecord(kind, f"t.{kind}", key, value, headers, 0, offset)


def _session(user: str) -> list[tuple[str, tuple]]:
    jpeg, out = _jpeg(), []
    for k in range(MINUTES * 60 // 2):  # a frame every 2 s, a 2 s audio chunk beside it
        ts = START + timedelta(seconds=2 * k)
        out.append(("frames", codec.encode_frame(user, "s1", ts, k, jpeg)))
        wav = codec.wav_bytes(b"\0\0" * 32_000, 16_000)
        out.append(
            ("audio", codec.encode_audio(user, "s1", ts, wav, duration_ms=2000, sample_rate=16_000))
        )
    return out


class _Deps:
    def close(self) -> None:
        pass


class _Built:
    """Construction stand-in: what each window held."""

    def __init__(self) -> None:
        self.windows: list[BaseWindow] = []

    async def __call__(self, deps, event) -> WindowOutcome:
        await asyncio.sleep(0)
        if isinstance(event, LateItem):
            return WindowOutcome(event.user_id, BASE_S, event.window_start_ms, "late")
        if isinstance(event, BaseWindow):
            self.windows.append(event)
        scale = BASE_S if isinstance(event, BaseWindow) else event.scale_s
        return WindowOutcome(event.user_id, scale, event.start_ms, "complete")


def _run(tmp_path: Path, records: list[RawRecord], **kw) -> tuple[_Built, list, list]:
    settings = load_settings(
        state_dir=tmp_path / "state",
        blob_dir=tmp_path / "blobs",
        max_payload_bytes=300_000,
        **kw.pop("settings", {}),
    )
    built, outcomes, dlq = _Built(), [], []
    flow = build_flow(
        settings,
        source=TestingSource(records, batch_size=100),
        dlq_sink=TestingSink(dlq),
        report_sink=TestingSink(outcomes),
        deps_factory=lambda s: _Deps(),
        process=built,
        session_writer=lambda deps, msg: None,
        now=lambda: NOW,
        tail=False,
        **kw,
    )
    run_main(flow)
    return built, outcomes, dlq


def test_hostile_records_beside_a_session_change_nothing_it_builds(tmp_path: Path) -> None:
    limits = codec.CodecLimits(max_payload_bytes=300_000)
    hostile = hostile_records("u1", START + timedelta(seconds=31), _jpeg(), limits, NOW)
    good = _session("u1")
    end = (
        "control",
        codec.encode_control("u1", "s1", START + timedelta(minutes=MINUTES), "session_end"),
    )
    mixed: list[tuple[str, tuple]] = []
    for k, rec in enumerate(good):  # the hostile records among the good ones
        mixed.append(rec)
        if k % 4 == 0 and k // 4 < len(hostile):
            h = hostile[k // 4]
            mixed.append((h.kind, h.record))
    mixed.append(end)
    records = [_raw(kind, rec, i) for i, (kind, rec) in enumerate(mixed)]

    built, _outcomes, dlq = _run(tmp_path, records)

    # the hostile ones are on the DLQ with their reasons
    expected = Counter(h.reason for h in hostile if h.reason is not None)
    assert Counter(d.header("reason") for d in dlq) == expected
    # the session's windows, and nothing outside its two minutes (the 2-byte chunk that
    # claims 2,000,000,000 ms opened 66,666 of them)
    starts = sorted(w.start_ms for w in built.windows)
    first = dt_to_ms(START)
    assert starts == [first + k * 30_000 for k in range(MINUTES * 2)]
    # every good capture built exactly once; the valid one at the bound beside them
    keys = Counter(i.key for w in built.windows for i in w.items)
    assert len(keys) == len(good) + 1 and set(keys.values()) == {1}
    assert any(key.endswith(f"-{codec.BIGINT_MAX}.jpg") for key in keys)


def test_users_nobody_made_are_refused(tmp_path: Path) -> None:
    asked: list[list[str]] = []

    def lookup(ids: list[str]) -> set[str]:
        asked.append(ids)
        return {"u1"} & set(ids)

    strangers = stranger_frames(500, START + timedelta(seconds=3), _jpeg())
    mixed = [*_session("u1"), *(("frames", r) for r in strangers)]
    end = codec.encode_control("u1", "s1", START + timedelta(minutes=MINUTES), "session_end")
    records = [_raw(kind, rec, i) for i, (kind, rec) in enumerate([*mixed, ("control", end)])]

    built, _outcomes, dlq = _run(
        tmp_path,
        records,
        settings={"ingest_create_users": False},
        known_users=KnownUsers(lookup),
    )
    assert Counter(d.header("reason") for d in dlq) == {codec.UNKNOWN_USER: 500}
    assert {w.user_id for w in built.windows} == {"u1"}
    # each id asked about once (the answers are cached), in few reads
    assert sum(len(a) for a in asked) == 501 and len(asked) < 50


def test_known_users_cache_is_bounded_and_expires() -> None:
    now = [0.0]
    reads: list[list[str]] = []

    def lookup(ids: list[str]) -> set[str]:
        reads.append(ids)
        return {i for i in ids if i.startswith("ok")}

    known = KnownUsers(lookup, ttl_s=60, negative_ttl_s=5, size=100, clock=lambda: now[0])
    assert known.known(["ok1", "bad"]) == {"ok1"}
    assert known.known(["ok1", "bad"]) == {"ok1"} and len(reads) == 1
    now[0] = 6.0  # an unknown user may have been made since: asked again; a known one not
    known.known(["ok1", "bad"])
    assert reads[-1] == ["bad"]
    known.known([f"x{i}" for i in range(1000)])
    assert len(known) == 100
