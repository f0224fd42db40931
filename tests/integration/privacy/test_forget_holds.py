"""A forget holds (issue #42): a forgotten range is recorded, and what could write it again
drops what falls in it: a window built after the forget (open when it came), a window
being built while it lands, a capture that arrives late, `worldmm retrigger`. Its bytes
leave the blob store (a container keeping other captures is written again without them),
also when the store was down during the forget; summaries overlapping it are rebuilt from
the windows that remain; a purge asked again after its rows went finishes its blobs."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from bench.ingest_sim import small_jpeg
from query_api.ops.forget import forget, purge
from tests.fixtures.construction_fakes import Embedder, Encoder, Roles
from tests.fixtures.windows import T10
from worldmm.blobs import BlobStoreError, LocalBlobStore
from worldmm.memory.late_and_control import record_late
from worldmm.memory.rebuild import retrigger
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, CoarseWindow, Item, dt_to_ms
from worldmm.privacy.forget_media import drain
from worldmm.store import blob_deletions
from worldmm.store.frames import list_frames
from worldmm.store.segments import get_segment_by_window, list_segments
from worldmm.store.users import ensure_user

pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles=Roles, embedder=Embedder, encoder=Encoder, window_max_attempts=1),
]

S = 1000


def _frame(user: str, at_s: int) -> Item:
    """Frame of second ``at_s`` after T10 (its bytes name it: findable in any blob)."""
    ts = dt_to_ms(T10) + at_s * S
    key = f"frames/{user}/s1/{ts}-{at_s}.jpg"
    jpeg, text = small_jpeg(at_s), f"FRAME-{user}-{at_s:04d}".encode()
    data = jpeg[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + jpeg[2:]
    return Item("frames", key, "s1", ts, ts, CaptureRef(key, seq=at_s, data=data))


def _window(user: str, k: int = 0, every_s: int = 1) -> BaseWindow:
    """The k-th 30 s window after T10, a frame every ``every_s`` seconds, bytes at hand."""
    items = tuple(_frame(user, 30 * k + s) for s in range(0, 30, every_s))
    return BaseWindow(user, dt_to_ms(T10) + 30 * k * S, items, False, "s1")


def _stored_seconds(deps, user: str) -> list[int]:
    with deps.db.connection() as conn:
        rows = list_frames(conn, user, limit=10_000)
    return sorted(r.seq for r in rows)


def _bytes_anywhere(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _blob_root(deps) -> Path:
    return deps.blobs.root


def _forget(deps, user: str, from_s: int, to_s: int):
    return forget(deps, user, T10 + timedelta(seconds=from_s), T10 + timedelta(seconds=to_s))


@pytest.fixture
def user(deps, user_id) -> str:
    with deps.db.transaction() as conn:
        ensure_user(conn, user_id)
    return user_id


def test_a_window_open_during_a_forget_is_built_without_what_it_forgot(deps, user) -> None:
    window = _window(user)  # open in the flow (its captures in memory) while the forget runs
    _forget(deps, user, 10, 20)
    outcome = asyncio.run(process_window(deps, window))
    assert outcome.status == "complete"
    assert _stored_seconds(deps, user) == [*range(10), *range(20, 30)]
    root = _blob_root(deps)
    assert not _bytes_anywhere(root, f"FRAME-{user}-0015".encode())
    assert _bytes_anywhere(root, f"FRAME-{user}-0005".encode())

    # a window wholly inside a forgotten range writes nothing at all
    _forget(deps, user, 30, 60)
    outcome = asyncio.run(process_window(deps, _window(user, 1)))
    assert outcome.status == "forgotten"
    assert segment_at(deps, user, 30, 30) is None


def segment_at(deps, user: str, scale: int, at_s: int):
    with deps.db.connection() as conn:
        return get_segment_by_window(conn, user, scale, T10 + timedelta(seconds=at_s))


class _ForgetMidBuild(Roles):
    """Captions like Roles; the first caption call waits for a forget that lands then."""

    def __init__(self, do_forget) -> None:
        super().__init__()
        self.do_forget = do_forget
        self.calls = 0

    async def caption(self, frames, transcript, seen_text=None):
        self.calls += 1
        if self.calls == 1:
            await asyncio.to_thread(self.do_forget)
        return await super().caption(frames, transcript, seen_text)


def test_a_forget_while_the_window_is_built_makes_it_start_again(deps, user) -> None:
    from dataclasses import replace

    roles = _ForgetMidBuild(lambda: _forget(deps, user, 0, 15))
    built = replace(deps, roles=roles)
    outcome = asyncio.run(process_window(built, _window(user)))
    assert outcome.status == "complete" and roles.calls == 2  # built again after the forget
    assert _stored_seconds(deps, user) == list(range(15, 30))
    drain(deps.db, deps.blobs, user)  # the first container (stored before) leaves the store
    assert not _bytes_anywhere(_blob_root(deps), f"FRAME-{user}-0003".encode())
    seg = segment_at(deps, user, 30, 0)
    assert seg is not None and seg.processing_status == "complete"


def test_a_late_capture_in_a_forgotten_range_is_not_kept(deps, user) -> None:
    _forget(deps, user, 0, 30)
    late = _frame(user, 12)
    assert record_late(deps, user, late) is False
    assert _stored_seconds(deps, user) == []
    assert not deps.blobs.exists(late.ref.blob_key)


def test_retrigger_brings_nothing_forgotten_back(deps, user) -> None:
    asyncio.run(process_window(deps, _window(user)))
    _forget(deps, user, 0, 30)
    result = asyncio.run(
        retrigger(deps, user, start=T10, end=T10 + timedelta(minutes=1), force=True)
    )
    assert all(o.status != "complete" or o.scale_s != 30 for o in result.windows)
    assert segment_at(deps, user, 30, 0) is None and _stored_seconds(deps, user) == []


class _FlakyStore(LocalBlobStore):
    """A local store that can be down (every call fails)."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise BlobStoreError("store down")

    def put(self, key, data):
        self._check()
        return super().put(key, data)

    def get(self, key):
        self._check()
        return super().get(key)

    def delete_prefix(self, prefix):
        self._check()
        return super().delete_prefix(prefix)


def test_forgotten_bytes_leave_the_store_even_when_it_was_down(deps, user, tmp_path) -> None:
    from dataclasses import replace

    store = _FlakyStore(tmp_path / "flaky")
    deps = replace(deps, blobs=store)
    asyncio.run(process_window(deps, _window(user)))
    store.down = True
    outcome = _forget(deps, user, 5, 10)  # answered: the rows are gone, the bytes queued
    assert outcome.blobs_pending >= 1 and outcome.rows["frames"] == 5
    assert _bytes_anywhere(store.root, f"FRAME-{user}-0007".encode())  # still there, for now
    with deps.db.connection() as conn:
        assert blob_deletions.pending(conn, user)

    store.down = False
    done = drain(deps.db, store)  # what the API's sweeper does every 30 s
    assert done.left == 0
    assert not _bytes_anywhere(store.root, f"FRAME-{user}-0007".encode())
    # the container was written again with the 25 captures that remain, and they are served
    from worldmm.media.window import read_capture
    from worldmm.store.frames import MediaRef

    with deps.db.connection() as conn:
        rows = list_frames(conn, user, limit=100)
        assert not blob_deletions.pending(conn, user)
    assert len(rows) == 25
    for row in rows:
        ref = MediaRef(row.media_key, row.media_offset, row.media_length)
        assert read_capture(store, row.blob_key, ref) == _frame(user, row.seq).ref.data


def test_summaries_overlapping_a_forget_are_rebuilt_from_what_remains(deps, user) -> None:
    windows = [_window(user, k, every_s=10) for k in range(6)]
    for w in windows:
        asyncio.run(process_window(deps, w))
    three = CoarseWindow(user, 180, dt_to_ms(T10), tuple(w.wid for w in windows), False, "s1")
    assert asyncio.run(process_window(deps, three)).status == "complete"

    outcome = _forget(deps, user, 60, 120)  # windows 2 and 3 of six
    assert outcome.summaries_rebuilt == 1 and outcome.rows["summaries_to_rebuild"] == 1
    seg = segment_at(deps, user, 180, 0)
    assert seg is not None and seg.processing_status == "complete"
    with deps.db.connection() as conn:
        bases = [
            s.window_start
            for s in list_segments(conn, user, T10, T10 + timedelta(minutes=3))
            if s.scale_seconds == 30
        ]
    assert bases == [T10 + timedelta(seconds=s) for s in (0, 30, 120, 150)]


def test_a_purge_asked_again_after_its_rows_went_finishes_the_blobs(deps, user, tmp_path) -> None:
    from dataclasses import replace

    store = _FlakyStore(tmp_path / "flaky")
    deps = replace(deps, blobs=store)
    asyncio.run(process_window(deps, _window(user)))
    store.down = True
    first = purge(deps, user)
    assert first is not None and first.blobs_pending
    store.down = False
    again = purge(deps, user)  # the user's rows are gone: still finished, not "unknown user"
    assert again is not None and again.blobs >= 1 and again.blobs_pending == 0
    assert not _bytes_anywhere(store.root, f"FRAME-{user}-0001".encode())
    assert purge(deps, user) is None  # nothing left of them: now unknown


def test_concurrent_forget_and_build_never_leave_forgotten_rows(deps, user) -> None:
    """Windows built while forgets of their spans land, many times: whichever commits
    first, no frame of a forgotten span is left."""
    errors: list[BaseException] = []

    def forget_all() -> None:
        try:
            for k in range(4):
                _forget(deps, user, 30 * k, 30 * k + 30)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=forget_all)
    thread.start()

    async def build() -> None:
        await asyncio.gather(*(process_window(deps, _window(user, k)) for k in range(4)))

    asyncio.run(build())
    thread.join()
    assert not errors
    assert _stored_seconds(deps, user) == []
    with deps.db.connection() as conn:
        rows = list_segments(conn, user, T10, T10 + timedelta(minutes=2))
    assert [s for s in rows if s.processing_status == "complete" and s.caption] == []


@pytest.mark.parametrize("create_users", [False, True])
def test_a_purge_while_the_window_is_built_leaves_nothing_and_no_user(
    deps, user, create_users
) -> None:
    """The wearer purged while their window waits on its caption: the build ends with
    nothing written, the wearer is not made again (also where the flow may make users: they
    were there when the build began), and the media it stored leaves the store."""
    from dataclasses import replace

    from worldmm.store.users import user_exists

    roles = _ForgetMidBuild(lambda: purge(deps, user))
    built = replace(deps, roles=roles).with_settings(ingest_create_users=create_users)
    outcome = asyncio.run(process_window(built, _window(user)))
    assert outcome.status == "forgotten" and outcome.segment_id is None
    with deps.db.connection() as conn:
        assert not user_exists(conn, user)
        assert (
            conn.execute("SELECT count(*) FROM segments WHERE user_id = %s", (user,)).fetchone()[0]
            == 0
        )
    drain(deps.db, deps.blobs, user)
    assert not _bytes_anywhere(_blob_root(deps), f"FRAME-{user}-0003".encode())
    if not create_users:  # (where the flow makes users, a later capture makes one anew)
        # a late capture of the purged wearer is not kept either
        assert record_late(built, user, _frame(user, 40)) is False
        with deps.db.connection() as conn:
            assert not user_exists(conn, user)
