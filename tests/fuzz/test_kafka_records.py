"""Fuzzing the ingest input (#17): Hypothesis-made frames, audio and control records, valid
and broken, through the real flow (decode → windows → construction stand-in → DLQ). Every
record either reaches construction whole or is on the DLQ with a known reason, and the flow
never stops. Counts go to $WORLDMM_FUZZ_REPORT_DIR/kafka_records.json when set."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from collections import Counter
from pathlib import Path

from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, TestingSource, run_main
from hypothesis import HealthCheck, given, settings

from connectors import codec
from dataflows.ingest import build_flow, decode_record
from tests.fixtures.record_strategies import NOW, huge_record, raw_records
from worldmm.blobs import LocalBlobStore, audio_key, frame_key
from worldmm.media.spool import WindowSpool
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.windows import BASE_S, BaseWindow, LateItem
from worldmm.settings import load_settings

EXAMPLES = 300
REASONS = {
    getattr(codec, n) for n in dir(codec) if n.isupper() and isinstance(getattr(codec, n), str)
}


class _Deps:
    def __init__(self, root: Path) -> None:
        self.blobs = LocalBlobStore(root / "blobs")
        self.spool = WindowSpool(root / "state" / "spool")
        self.captured: dict[str, bytes] = {}  # what construction received, by blob key

    def close(self) -> None:
        pass


async def _construct(deps: _Deps, event) -> WindowOutcome:
    """Construction stand-in: the fuzz is about input, not models. It keeps the bytes each
    capture reached construction with (carried, or from the window's spool)."""
    if isinstance(event, LateItem):
        deps.captured[event.item.ref.blob_key] = event.item.ref.data
        return WindowOutcome(event.user_id, BASE_S, event.window_start_ms, "late")
    if isinstance(event, BaseWindow):
        spooled = deps.spool.read(event.user_id, event.start_ms)
        for i in event.items:
            deps.captured[i.ref.blob_key] = i.ref.data or spooled[i.ref.blob_key]
    scale = BASE_S if isinstance(event, BaseWindow) else event.scale_s
    return WindowOutcome(event.user_id, scale, event.start_ms, "complete")


def _run(root: Path, records) -> tuple[list, list, list, dict[str, bytes]]:
    deps = _Deps(root)
    cfg = load_settings(state_dir=root / "state", blob_dir=root / "blobs", max_payload_bytes=65_536)
    dlq, outcomes, sessions = [], [], []
    flow = build_flow(
        cfg,
        source=TestingSource(records),
        dlq_sink=TestingSink(dlq),
        report_sink=TestingSink(outcomes),
        deps_factory=lambda s: deps,
        process=_construct,
        session_writer=lambda deps, msg: sessions.append(msg),
        now=lambda: NOW,
        tail=False,
    )
    # With recovery, the windows still open at the end are snapshotted: their captures'
    # bytes go to their spools (the state keeps references only).
    recovery = root / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    run_main(flow, recovery_config=RecoveryConfig(str(recovery)))
    for user, start in deps.spool.windows():
        for key, data in deps.spool.read(user, start).items():
            deps.captured.setdefault(key, data)
    return dlq, outcomes, sessions, deps.captured


def test_every_record_is_built_or_dead_lettered_with_a_reason(tmp_path: Path) -> None:
    # Hypothesis draws the records; they then go through one run of the flow together (a
    # flow per example cost ~1.5 s each). A failure names the offending record's offset.
    batches: list[list] = []

    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(records=raw_records())
    def collect(records) -> None:
        batches.append(records)

    collect()
    records = [
        dataclasses.replace(r, offset=i)
        for i, r in enumerate([*itertools.chain.from_iterable(batches), huge_record(65_536)])
    ]
    dlq, outcomes, sessions, captured = _run(tmp_path, records)  # raises if the flow stops

    limits = codec.CodecLimits(max_payload_bytes=65_536)
    verdicts = [decode_record(r, limits, lambda: NOW) for r in records]
    bad = {r.offset: v for r, v in zip(records, verdicts, strict=True)
           if not isinstance(v, codec.Message)}  # fmt: skip
    got = {int(d.header("source_offset")): d for d in dlq}
    assert set(got) == set(bad), sorted(set(got) ^ set(bad))[:10]
    counts: Counter[str] = Counter(records=len(records), windows=len(outcomes))
    for offset, d in got.items():
        reason = d.header("reason")
        assert reason and reason.split(":")[0] in REASONS, (offset, reason)
        assert reason == bad[offset].header("reason"), records[offset]
        assert d.header("detail"), ("a DLQ record says why", records[offset])
        counts[f"dlq:{reason}"] += 1
    # every valid capture reaches construction (which stores its window's container) whole,
    # or, in a window still open at the end, its spool
    for v in verdicts:
        if isinstance(v, codec.FrameMessage):
            assert captured[frame_key(v.user_id, v.session_id, v.ts, v.seq)] == v.jpeg
            counts["built:frame"] += 1
        elif isinstance(v, codec.AudioMessage):
            assert captured[audio_key(v.user_id, v.session_id, v.ts)]
            counts["built:audio"] += 1
        elif isinstance(v, codec.ControlMessage):
            counts["built:control"] += 1
    assert len(sessions) == counts["built:control"]
    assert all(o.status in ("complete", "late") for o in outcomes)
    # the strategies must reach both sides, and many kinds of bad input
    assert counts["built:frame"] and counts["built:audio"] and counts["built:control"]
    assert len([k for k in counts if k.startswith("dlq:")]) >= 8, counts
    out = os.environ.get("WORLDMM_FUZZ_REPORT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        report = {"examples": EXAMPLES, "counts": dict(sorted(counts.items()))}
        (Path(out) / "kafka_records.json").write_text(json.dumps(report, indent=2) + "\n")
