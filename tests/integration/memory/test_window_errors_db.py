"""Nothing is dropped on an unexpected error (issue #42): a window whose media store raised
what nobody planned for (not the blob store's OSError, not a model, not an outage) keeps its
captures in the spool and is failed with the error's class as its reason, and
`worldmm retrigger` builds it from them once the cause is gone."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from bench.ingest_sim import small_jpeg
from tests.fixtures.construction_fakes import Embedder, Encoder, Roles
from tests.fixtures.windows import T10, segment_at
from worldmm.blobs import LocalBlobStore
from worldmm.memory.rebuild import retrigger
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, Item, dt_to_ms
from worldmm.store.frames import list_frames

pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles=Roles, embedder=Embedder, encoder=Encoder, window_max_attempts=1),
]


class _Breaking(LocalBlobStore):
    armed = True

    def put(self, key, data):
        if self.armed:
            raise MemoryError("allocating the container")
        return super().put(key, data)


def test_an_unexpected_error_keeps_the_window_for_retrigger(deps, user_id, tmp_path) -> None:
    store = _Breaking(tmp_path / "blobs-breaking")
    deps = replace(deps, blobs=store)
    items = []
    for k in range(30):
        ts = dt_to_ms(T10) + k * 1000
        key = f"frames/{user_id}/s1/{ts}-{k}.jpg"
        items.append(Item("frames", key, "s1", ts, ts, CaptureRef(key, seq=k, data=small_jpeg(k))))
    window = BaseWindow(user_id, dt_to_ms(T10), tuple(items), False, "s1")

    outcome = asyncio.run(process_window(deps, window))

    assert (outcome.status, outcome.reason) == ("failed", "MemoryError")
    assert not outcome.media_durable and outcome.unrecorded == ()
    spooled = deps.spool.read(user_id, window.start_ms)
    assert spooled == {i.ref.blob_key: i.ref.data for i in items}  # every capture kept
    seg = segment_at(deps, user_id, 30, T10)
    assert seg.processing_status == "failed" and seg.error.startswith("MemoryError")

    store.armed = False
    result = asyncio.run(retrigger(deps, user_id))
    assert [o.status for o in result.windows if o.scale_s == 30] == ["complete"]
    assert segment_at(deps, user_id, 30, T10).processing_status == "complete"
    with deps.db.connection() as conn:
        rows = list_frames(conn, user_id, limit=100)
    assert len(rows) == 30 and all(r.media_key for r in rows)  # in the container now
    assert deps.spool.read(user_id, window.start_ms) == {}  # and the spool went
