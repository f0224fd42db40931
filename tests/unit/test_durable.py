"""Bytes a snapshot counts on are on disk when the write returns: the spool's appends and the
local blob store's writes fsync the file, and the directory that gained a name (issue #42)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worldmm.blobs import LocalBlobStore
from worldmm.media.spool import WindowSpool


@pytest.fixture
def synced(monkeypatch) -> list[Path]:
    """Every path fsynced from now on (files and directories), in order."""
    seen: list[Path] = []
    real = os.fsync

    def spy(fd: int) -> None:
        seen.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


def test_a_spool_append_is_synced_with_its_new_file_and_directories(tmp_path, synced):
    spool = WindowSpool(tmp_path / "spool")
    spool.append("alice", 30_000, [("frames/a.jpg", b"jpeg")])
    path = spool.path("alice", 30_000)
    assert path in synced  # the bytes
    assert path.parent in synced  # the new file's name
    assert tmp_path / "spool" in synced  # the new user directory's name
    assert synced.index(path) < synced.index(path.parent)

    synced.clear()
    spool.append("alice", 30_000, [("frames/b.jpg", b"more")])
    assert synced == [path]  # an append to a known file: its bytes only
    assert spool.read("alice", 30_000) == {"frames/a.jpg": b"jpeg", "frames/b.jpg": b"more"}


def test_a_local_blob_is_synced_new_and_replaced(tmp_path, synced):
    store = LocalBlobStore(tmp_path / "blobs")
    key = "media/alice/30000-abc.wmc"
    assert store.put(key, b"container")
    path = store.path(key)
    assert path in synced and path.parent in synced
    assert store.root / "media" in synced  # alice's new directory is named on disk
    assert synced.index(path) < synced.index(path.parent)

    synced.clear()
    assert store.put(key, b"other bytes")  # replaced through a temp file
    assert path.parent in synced and len(synced) == 2  # the temp file, then the directory
    assert store.get(key) == b"other bytes"
    synced.clear()
    assert not store.put(key, b"other bytes")  # the same bytes: nothing written
    assert synced == []
