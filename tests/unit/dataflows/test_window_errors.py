"""Nothing is dropped on an unexpected error (issue #42): a window whose path raised what
nobody planned for keeps its captures (spool) and ends on the DLQ with the error's class as
its reason, each capture no row points at as a record of its topic."""

from __future__ import annotations

import concurrent.futures as cf
from datetime import UTC, datetime
from pathlib import Path

from connectors import codec
from connectors.dlq import parse_dlq_record
from dataflows.construct_step import ConstructLogic
from dataflows.ingest import outcome_dlq
from worldmm.media.spool import WindowSpool
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.windows import BaseWindow, Item
from worldmm.settings import load_settings

T0 = 1_767_225_600_000
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


class _Raising:
    def submit(self, event) -> cf.Future:
        fut: cf.Future = cf.Future()
        fut.set_exception(MemoryError("decoding a frame"))
        return fut


def _window() -> BaseWindow:
    items = []
    for k in range(3):
        key = f"frames/u1/s1/{T0 + k * 1000}-{k}.jpg"
        ref = CaptureRef(key, seq=k, data=b"\xff\xd8frame%d\xff\xd9" % k)
        items.append(Item("frames", key, "s1", T0 + k * 1000, T0 + k * 1000, ref))
    return BaseWindow("u1", T0, tuple(items), False, "s1")


def test_a_window_that_raised_keeps_its_captures_and_goes_to_the_dlq(tmp_path: Path) -> None:
    spool = WindowSpool(tmp_path / "spool")
    logic = ConstructLogic(lambda: _Raising(), None, spool)
    window = _window()
    (outcome,), _ = logic.on_batch([window])
    assert (outcome.status, outcome.reason) == ("failed", "MemoryError")
    assert not outcome.media_durable
    assert spool.read("u1", T0) == {i.ref.blob_key: i.ref.data for i in window.items}

    settings = load_settings(state_dir=tmp_path / "state")
    records = outcome_dlq(outcome, NOW, settings, spool)
    entries = [parse_dlq_record(r.key, r.value, r.headers) for r in records]
    assert [e.kind for e in entries] == ["window", "message", "message", "message"]
    assert {e.reason for e in entries} == {"MemoryError"}
    assert entries[0].body["captures_on_dlq"] == 3
    # each capture goes whole: re-produced to its topic, it decodes to the same frame
    for entry, item in zip(entries[1:], window.items, strict=True):
        assert entry.value == item.ref.data
        assert entry.source_topic == settings.topic("frames")
        headers = dict(entry.original_headers)
        assert int(headers["seq"]) == item.ref.seq
        assert int(headers["ts"]) == codec.to_epoch_ms(
            datetime.fromtimestamp(item.ts_ms / 1000, UTC)
        )
