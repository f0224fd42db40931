"""A window's media path: its captures become one container in one PUT (frames through the
transform hook first), each capture reads back from it, a failing store is reported with
the references the rows get, and a window's media can be deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.blobs import delete_window_media
from worldmm.blobs import BlobNotFound, LocalBlobStore, audio_key, frame_key
from worldmm.media.container import Capture
from worldmm.media.spool import WindowSpool
from worldmm.media.window import (
    MediaStoreFailed,
    read_capture,
    read_captures,
    store_window,
)
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.windows import BaseWindow, Item, dt_to_ms
from worldmm.metrics import BLOB_REQUESTS

START = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)


def _window() -> BaseWindow:
    items = []
    for k in range(0, 30, 3):
        ts = START + timedelta(seconds=k)
        key, ms = frame_key("u1", "s1", ts, k), dt_to_ms(ts)
        items.append(Item("frames", key, "s1", ms, ms, CaptureRef(key, seq=k, data=b"jpeg%d" % k)))
    for k in range(0, 30, 5):
        ts = START + timedelta(seconds=k)
        key, ms = audio_key("u1", "s1", ts), dt_to_ms(ts)
        ref = CaptureRef(key, sample_rate=16000, content_type="audio/wav", data=b"wav%d" % k)
        items.append(Item("audio", key, "s1", ms, ms + 5000, ref))
    return BaseWindow("u1", dt_to_ms(START), tuple(items), False, "s1")


def _deps(root: Path) -> SimpleNamespace:
    # every capture carries its bytes, so nothing asks the database
    return SimpleNamespace(blobs=LocalBlobStore(root / "blobs"), spool=WindowSpool(root / "sp"))


def _puts() -> float:
    return BLOB_REQUESTS.labels("local", "put")._value.get()


def test_a_window_is_one_put_and_every_capture_reads_back(tmp_path: Path) -> None:
    deps, window = _deps(tmp_path), _window()

    def blur(c: Capture) -> bytes:  # the hook where frames change before they are stored
        return b"blurred:" + c.data

    before = _puts()
    media = store_window(deps, window, transform=blur)
    assert _puts() - before == 1
    assert deps.blobs.list("media/u1/") == [media.container_key]
    assert set(media.refs) == {i.ref.blob_key for i in window.items}
    for i in window.items:
        stored = read_capture(deps.blobs, i.ref.blob_key, media.refs[i.ref.blob_key])
        assert stored == (b"blurred:" if i.kind == "frames" else b"") + i.ref.data
    # construction gets the captures as taken, without reading the store back
    keys = [i.ref.blob_key for i in window.items]
    assert read_captures(deps, media, keys) == {i.ref.blob_key: i.ref.data for i in window.items}
    # the same captures make the same object under the same key (a replay rewrites nothing new)
    assert store_window(deps, window, transform=blur).container_key == media.container_key
    assert len(deps.blobs.list("media/u1/")) == 1

    assert delete_window_media(deps.blobs, "u1", window.start_ms) == 1
    first = window.items[0].ref.blob_key
    with pytest.raises(BlobNotFound):
        read_capture(deps.blobs, first, media.refs[first])


def test_a_failing_store_reports_where_the_captures_would_be(tmp_path: Path) -> None:
    deps = _deps(tmp_path)
    (tmp_path / "blobs" / "media").write_bytes(b"a file where a directory should be")
    with pytest.raises(MediaStoreFailed) as info:
        store_window(deps, _window())
    assert isinstance(info.value.cause, OSError)
    assert {r.key for r in info.value.refs.values()} == {info.value.key}


def test_frames_named_first_are_transformed_first(tmp_path: Path) -> None:
    """The order a detection budget serves them in; the container is the same either way."""
    deps, window = _deps(tmp_path), _window()
    frames = [i.ref.blob_key for i in window.items if i.kind == "frames"]
    first = {frames[3], frames[7]}
    seen: list[str] = []

    def record(c: Capture) -> bytes:
        seen.append(c.key)
        return c.data

    media = store_window(deps, window, transform=record, first=first)
    assert set(seen[:2]) == first and sorted(seen) == sorted(frames)
    assert store_window(deps, window, transform=record).container_key == media.container_key
