"""The capture spool: appends read back by key, the last copy of a capture wins, and a record
cut short (a crash mid-write) or garbage in between loses nothing else."""

from __future__ import annotations

import pytest

from worldmm.media.spool import WindowSpool, parse


@pytest.fixture
def spool(tmp_path) -> WindowSpool:
    return WindowSpool(tmp_path / "spool")


def test_appends_read_back_and_delete(spool) -> None:
    spool.append("u1", 30_000, [("frames/u1/s1/1-0.jpg", b"a" * 10), ("audio/u1/s1/1.wav", b"b")])
    spool.append("u1", 30_000, [("frames/u1/s1/2-1.jpg", b"c")])
    spool.append("u1", 60_000, [("frames/u1/s1/31-2.jpg", b"d")])
    assert spool.read("u1", 30_000) == {
        "frames/u1/s1/1-0.jpg": b"a" * 10,
        "audio/u1/s1/1.wav": b"b",
        "frames/u1/s1/2-1.jpg": b"c",
    }
    assert list(spool.windows()) == [("u1", 30_000), ("u1", 60_000)]
    spool.delete("u1", 30_000)
    assert spool.read("u1", 30_000) == {} and list(spool.windows()) == [("u1", 60_000)]
    spool.delete("u1", 30_000)  # deleting twice is harmless


def test_a_capture_appended_twice_keeps_its_last_copy(spool) -> None:
    spool.append("u1", 0, [("k", b"first")])
    spool.append("u1", 0, [("k", b"redelivered")])
    assert spool.read("u1", 0) == {"k": b"redelivered"}


def test_a_torn_record_is_skipped_and_later_appends_still_read(spool) -> None:
    spool.append("u1", 0, [("k1", b"x" * 100)])
    path = spool.path("u1", 0)
    whole = path.read_bytes()
    spool.append("u1", 0, [("k2", b"y" * 100)])
    torn = path.read_bytes()[: len(whole) + 40]  # a crash cut the second record short
    path.write_bytes(torn)
    assert spool.read("u1", 0) == {"k1": b"x" * 100}
    spool.append("u1", 0, [("k2", b"y" * 100), ("k3", b"z")])  # redelivered after the restart
    assert spool.read("u1", 0) == {"k1": b"x" * 100, "k2": b"y" * 100, "k3": b"z"}


def test_garbage_and_bad_checksums_are_resynchronised_past(spool) -> None:
    spool.append("u1", 0, [("k1", b"one")])
    good = spool.path("u1", 0).read_bytes()
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # same length, wrong checksum
    assert parse(b"WMSP\x00garbage" + bytes(corrupt) + good) == {"k1": b"one"}
    assert parse(bytes(corrupt)) == {}


def test_unsafe_user_ids_never_become_paths(spool) -> None:
    for bad in ("..", "a/b", ""):
        with pytest.raises(ValueError):
            spool.path(bad, 0)
