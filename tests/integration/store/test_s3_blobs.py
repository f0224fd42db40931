"""The S3 blob store against a real S3-protocol server on loopback (moto's server mode): the
same behaviour as the local store, a frame is one ranged GET of its window container, and an
outage is one exception type (BlobStoreError) that ends when the server is back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.s3 import S3Server, s3_server
from worldmm.blobs import (
    BlobNotFound,
    BlobStoreError,
    S3BlobStore,
    frame_key,
    user_prefixes,
    window_media_key,
)
from worldmm.media.container import Capture, build
from worldmm.media.window import read_capture, read_refs
from worldmm.metrics import BLOB_REQUESTS
from worldmm.store.frames import MediaRef

pytestmark = pytest.mark.integration

T0 = 1_767_225_600_000


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with s3_server() as s:
        yield s


@pytest.fixture
def store(server: S3Server, request) -> S3BlobStore:
    bucket = server.bucket(f"b-{abs(hash(request.node.name)) % 10**8}")
    return S3BlobStore(bucket, "worldmm/blobs", client=server.client())


def _window() -> tuple[list[Capture], bytes, str]:
    caps = [
        Capture(f"frames/u1/s1/{T0 + k * 1000}-{k}.jpg", "frames", T0 + k * 1000,
                T0 + k * 1000, bytes([k]) * (100 + k), seq=k)
        for k in range(30)
    ]  # fmt: skip
    caps.append(
        Capture(f"audio/u1/s1/{T0}.wav", "audio", T0, T0 + 5000, b"RIFF" + b"\0" * 4000,
                sample_rate=16000, content_type="audio/wav")
    )  # fmt: skip
    c = build(caps)
    return caps, c.data, window_media_key("u1", T0, c.digest)


def _requests(op: str) -> float:
    return BLOB_REQUESTS.labels("s3", op)._value.get()


def test_round_trip_list_and_delete(store: S3BlobStore) -> None:
    key = frame_key("u1", "s1", _dt(T0), 0)
    assert store.put(key, b"jpeg") is True
    assert store.get(key) == b"jpeg" and store.exists(key)
    assert store.get_range(key, 1, 2) == b"pe"
    with pytest.raises(BlobNotFound):
        store.get("frames/u1/s1/0-0.jpg")
    assert not store.exists("frames/u1/s1/0-0.jpg")
    with pytest.raises(BlobStoreError):  # past the end: not the object a row points into
        store.get_range(key, 2, 10)
    store.put("frames/u10/s1/1-0.jpg", b"other user")
    assert store.list("frames/u1/") == [key]
    assert sum(store.delete_prefix(p) for p in user_prefixes("u1")) == 1
    assert store.list("frames/") == ["frames/u10/s1/1-0.jpg"]


def test_one_frame_is_one_ranged_get_of_its_container(store: S3BlobStore) -> None:
    caps, data, key = _window()
    store.put(key, data)
    from worldmm.media.container import read_index

    refs = {e.key: MediaRef(key, e.offset, e.length) for e in read_index(data)}
    before = _requests("get_range"), _requests("get")
    for c in caps:
        assert read_capture(store, c.key, refs[c.key]) == c.data
    assert _requests("get_range") - before[0] == len(caps) and _requests("get") == before[1]
    # several captures of one container: one whole GET, CRC-checked
    wanted = [(c.key, refs[c.key]) for c in caps[:5]]
    assert read_refs(store, key, wanted) == {c.key: c.data for c in caps[:5]}
    assert _requests("get") - before[1] == 1
    # a frame stored alone (older layout) is the object under its own key
    store.put(caps[0].key, b"old layout")
    assert read_capture(store, caps[0].key, None) == b"old layout"


def test_an_outage_is_a_blob_store_error_until_the_server_is_back(
    server: S3Server, store: S3BlobStore
) -> None:
    _caps, data, key = _window()
    with server.outage():
        for call in (
            lambda: store.put(key, data),
            lambda: store.get(key),
            lambda: store.get_range(key, 0, 8),
            lambda: store.list("media/"),
        ):
            with pytest.raises(BlobStoreError) as info:
                call()
            assert isinstance(info.value, OSError)
            assert "worldmm-test-secret" not in str(info.value)
    assert store.put(key, data) is True  # back: the same write succeeds
    assert store.get(key) == data


def _dt(ms: int):
    from worldmm.memory.windows import ms_to_dt

    return ms_to_dt(ms)
