"""Local blob store: key safety, idempotent atomic puts, listing and prefix deletes."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest

from tests.fixtures.blobs import session_prefixes
from worldmm.blobs import (
    BlobKeyError,
    BlobNotFound,
    BlobStore,
    BlobStoreError,
    LocalBlobStore,
    S3BlobStore,
    audio_key,
    build_blob_store,
    frame_key,
    parse_s3_uri,
    user_prefixes,
    window_media_key,
    window_media_prefix,
)

TS = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)


@pytest.fixture
def store(tmp_path):
    return LocalBlobStore(tmp_path / "blobs")


def test_keys_have_the_documented_shape():
    assert frame_key("u1", "s1", TS, 4) == "frames/u1/s1/1772366400250-4.jpg"
    assert audio_key("u1", "s1", TS) == "audio/u1/s1/1772366400250.wav"
    assert user_prefixes("u1") == ["frames/u1/", "audio/u1/", "media/u1/"]
    assert (
        window_media_key("u1", 1772366400000, "0af3c2d1") == "media/u1/1772366400000-0af3c2d1.wmc"
    )
    assert window_media_prefix("u1", 1772366400000) == "media/u1/1772366400000-"
    assert session_prefixes("u1", "s1") == ["frames/u1/s1/", "audio/u1/s1/"]


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "a\\b", "", "x" * 129, "a b"])
def test_key_builders_reject_unsafe_ids(bad):
    with pytest.raises(BlobKeyError):
        frame_key(bad, "s1", TS, 0)
    with pytest.raises(BlobKeyError):
        audio_key("u1", bad, TS)


@pytest.mark.parametrize(
    "key", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", "a\\..\\b", "a/b/", "", "é/x"]
)
def test_path_traversal_and_odd_keys_rejected(store, key):
    with pytest.raises(BlobKeyError):
        store.put(key, b"x")
    with pytest.raises(BlobKeyError):
        store.get(key)


def test_symlink_escape_rejected(store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.root / "frames").symlink_to(outside)
    with pytest.raises(BlobKeyError):
        store.put("frames/u1/a.jpg", b"x")
    assert not any(outside.iterdir())


def test_put_is_idempotent_and_atomic(store):
    key = frame_key("u1", "s1", TS, 0)
    assert store.put(key, b"abc") is True
    assert store.put(key, b"abc") is False  # same bytes: nothing rewritten
    assert store.get(key) == b"abc"
    assert store.put(key, b"abcd") is True  # a corrected payload replaces the old one
    assert store.get(key) == b"abcd"
    leftovers = [p for p in store.root.rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []
    assert isinstance(store, BlobStore)


def test_get_missing_and_exists(store):
    with pytest.raises(BlobNotFound):
        store.get("frames/u1/s1/none.jpg")
    assert not store.exists("frames/u1/s1/none.jpg")
    store.put("frames/u1/s1/1-0.jpg", b"x")
    assert store.exists("frames/u1/s1/1-0.jpg")


def test_list_and_delete_prefix(store):
    for user in ("u1", "u10"):
        for s in ("s1", "s2"):
            store.put(frame_key(user, s, TS, 0), b"f")
            store.put(audio_key(user, s, TS), b"a")
    assert store.list("frames/u1/") == [
        "frames/u1/s1/1772366400250-0.jpg",
        "frames/u1/s2/1772366400250-0.jpg",
    ]
    # a string prefix, like S3: 'frames/u1' also matches u10
    assert len(store.list("frames/u1")) == 4
    assert store.list("frames/nobody/") == []
    deleted = sum(store.delete_prefix(p) for p in user_prefixes("u1"))
    assert deleted == 4
    assert store.list("frames/u1/") == [] and store.list("audio/u1/") == []
    assert len(store.list("frames/u10/")) == 2 and len(store.list("audio/")) == 2
    assert not (store.root / "frames" / "u1").exists()  # empty dirs pruned
    with pytest.raises(BlobKeyError):
        store.delete_prefix("")
    with pytest.raises(BlobKeyError):
        store.delete_prefix("../")


def test_build_blob_store_local(tmp_path):
    from worldmm.settings import Settings

    store = build_blob_store(Settings(blob_dir=tmp_path / "b"))
    assert isinstance(store, LocalBlobStore) and store.root == (tmp_path / "b").resolve()


def test_s3_without_boto3_gives_install_hint(monkeypatch):
    # a None entry makes ``import boto3`` raise ImportError, as on a machine without it
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(ImportError, match="pip install boto3"):
        S3BlobStore("bucket")


def test_parse_s3_uri():
    assert parse_s3_uri("s3://my-bucket/worldmm/blobs") == ("my-bucket", "worldmm/blobs")
    assert parse_s3_uri("s3://my-bucket") == ("my-bucket", "")
    with pytest.raises(ValueError):
        parse_s3_uri("http://x/y")


def test_put_replaces_a_file_cut_short_by_a_crash(store):
    key = frame_key("u1", "s1", TS, 9)
    store.put(key, b"full bytes")
    store.path(key).write_bytes(b"full")  # what a crash mid-write leaves
    assert store.put(key, b"full bytes") is True  # the redelivered message repairs it
    assert store.get(key) == b"full bytes"
    assert not [p for p in store.root.rglob(".tmp-*")]


def test_put_recreates_a_directory_removed_underneath(store):
    store.put(frame_key("u1", "s1", TS, 1), b"a")
    assert store.delete_prefix("frames/u1/") == 1  # empties and removes frames/u1/s1/
    key = frame_key("u1", "s1", TS, 2)
    assert store.put(key, b"b") is True
    assert store.get(key) == b"b"


def test_window_media_key_refuses_what_is_not_a_digest():
    for bad in ("../x", "ABCDEF12", "0af3", "0af3c2d1/x"):
        with pytest.raises(BlobKeyError):
            window_media_key("u1", 0, bad)
    with pytest.raises(BlobKeyError):
        window_media_prefix("u1", -1)


def test_ranged_reads(store):
    store.put("media/u1/0-0af3c2d1.wmc", b"0123456789")
    assert store.get_range("media/u1/0-0af3c2d1.wmc", 3, 4) == b"3456"
    assert store.get_range("media/u1/0-0af3c2d1.wmc", 0, 0) == b""
    with pytest.raises(BlobStoreError):  # past the end: the object is not what the row says
        store.get_range("media/u1/0-0af3c2d1.wmc", 8, 4)
    with pytest.raises(BlobNotFound):
        store.get_range("media/u1/0-ffffffff.wmc", 0, 1)


def test_a_failing_disk_is_a_blob_store_error(store):
    """Whatever the backend, a failed write is one exception type (an OSError)."""
    (store.root / "frames").write_bytes(b"a file where a directory should be")
    with pytest.raises(BlobStoreError) as info:
        store.put("frames/u1/s1/1-0.jpg", b"x")
    assert isinstance(info.value, OSError)
