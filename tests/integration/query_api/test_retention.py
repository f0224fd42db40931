"""Retention of raw media with an injected clock: frames and audio older than the user's
retention go (rows and blobs), text memory stays, the frames route answers 410, the browser
shows a placeholder; counts reach the admin audit; a second run finds nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.fixtures.api import ADMIN
from tests.fixtures.wearers import seed_segment
from worldmm.blobs import audio_key, frame_key
from worldmm.privacy import retention
from worldmm.store import frames as frame_store
from worldmm.store.admin_audit import list_admin_actions
from worldmm.store.frames import AudioBatchRow, FrameBatchRow
from worldmm.store.users import update_profile

pytestmark = pytest.mark.integration

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(days=10)  # past a 7-day retention
NEW = NOW - timedelta(days=2)
JPEG = b"\xff\xd8\xff\xe0" + b"frame" + b"\xff\xd9"


def capture(deps, user_id: str, at: datetime) -> tuple[str, str]:
    """A frame and an audio chunk at ``at`` (rows and blobs), and a segment about them."""
    fkey, akey = frame_key(user_id, "s1", at, 0), audio_key(user_id, "s1", at)
    with deps.db.transaction() as conn:
        frame_store.insert_frames(conn, user_id, [FrameBatchRow("s1", at, 0, fkey)])
        frame_store.insert_audio_chunks(conn, user_id, [AudioBatchRow("s1", at, 5000, 16000, akey)])
    deps.blobs.put(fkey, JPEG)
    deps.blobs.put(akey, b"RIFF....WAVE")
    seed_segment(deps, user_id, at, f"Coffee with Maya at {at:%H:%M}.", [("I", "met", "Maya")])
    return fkey, akey


@pytest.fixture
def clocked(api_deps, monkeypatch):
    monkeypatch.setattr(api_deps, "clock", lambda: NOW)
    return api_deps


def test_retention_removes_old_media_keeps_text_and_answers_410(client, clocked, make_user):
    deps = clocked
    a, b = make_user(), make_user()
    old_frame, old_audio = capture(deps, a.user_id, OLD)
    new_frame, new_audio = capture(deps, a.user_id, NEW)
    b_frame, _ = capture(deps, b.user_id, OLD)  # b keeps the default: media kept
    with deps.db.transaction() as conn:
        update_profile(conn, a.user_id, {"retention_days": 7})

    # on read, before any run: the expired frame is gone for the API, the new one served
    url = f"/v1/users/{a.user_id}/frames/"
    r = client.get(url + old_frame, headers=a.headers)
    assert r.status_code == 410 and "retention" in r.json()["detail"]
    assert client.get(url + new_frame, headers=a.headers).status_code == 200
    b_url = f"/v1/users/{b.user_id}/frames/{b_frame}"
    assert client.get(b_url, headers=b.headers).status_code == 200

    cutoffs = retention.plan(deps.db, deps.settings.media_retention_days, NOW)
    assert cutoffs[a.user_id] == NOW - timedelta(days=7) and b.user_id not in cutoffs
    assert retention.count_expired(deps.db, a.user_id, cutoffs[a.user_id]) == 2
    seen: list[int] = []
    done = retention.expire_user(
        deps.db, deps.blobs, a.user_id, cutoffs[a.user_id], batch=1,
        progress=lambda _u, n: seen.append(n),
    )  # fmt: skip
    assert done.rows == {"frames": 1, "audio_chunks": 1} and done.blobs == 2
    assert seen == [1, 1]  # one batch each, told as it went

    assert not deps.blobs.exists(old_frame) and not deps.blobs.exists(old_audio)
    assert deps.blobs.exists(new_frame) and deps.blobs.exists(new_audio)
    assert deps.blobs.exists(b_frame)
    with deps.db.connection() as conn:
        frames = frame_store.list_frames(conn, a.user_id)
        audio = frame_store.list_audio_chunks(conn, a.user_id)
        audit = list_admin_actions(conn, subject_user=a.user_id)
    assert [f.blob_key for f in frames] == [new_frame]
    assert [c.blob_key for c in audio] == [new_audio]
    assert audit[0].action == "retention.expire" and audit[0].actor == "retention"
    assert audit[0].detail["rows"] == {"frames": 1, "audio_chunks": 1}

    # text memory stays: both segments with their captions
    segs = client.get(f"/v1/users/{a.user_id}/segments", headers=a.headers).json()["items"]
    assert sorted(s["caption"] for s in segs) == [
        f"Coffee with Maya at {OLD:%H:%M}.",
        f"Coffee with Maya at {NEW:%H:%M}.",
    ]
    assert client.get(url + old_frame, headers=a.headers).status_code == 410
    assert client.get(url + old_frame, headers=ADMIN).status_code == 410

    again = retention.expire_user(deps.db, deps.blobs, a.user_id, cutoffs[a.user_id])
    assert again.deleted == 0 and again.blobs == 0  # idempotent


def test_retention_and_face_blur_are_fields_of_the_profile(client, clocked, make_user):
    """PATCH /v1/users/{id} sets the wearer's retention and face-blur opt-out; an explicit
    null returns to the deployment's default; bad values are a 422."""
    deps = clocked
    a = make_user()
    url = f"/v1/users/{a.user_id}"
    me = client.get(url, headers=a.headers).json()
    assert me["retention_days"] is None and me["face_blur"] is True
    r = client.patch(url, json={"retention_days": 3, "face_blur": False}, headers=a.headers)
    assert r.status_code == 200, r.text
    assert r.json()["retention_days"] == 3 and r.json()["face_blur"] is False
    assert retention.plan(deps.db, None, NOW, [a.user_id]) == {a.user_id: NOW - timedelta(days=3)}
    back = client.patch(url, json={"retention_days": None}, headers=a.headers).json()
    assert back["retention_days"] is None and back["face_blur"] is False  # only what was given
    assert a.user_id not in retention.plan(deps.db, None, NOW)
    assert retention.plan(deps.db, 30, NOW, [a.user_id]) == {a.user_id: NOW - timedelta(days=30)}
    for bad in ({"retention_days": 0}, {"face_blur": "maybe"}, {"retention_days": "a week"}):
        assert client.patch(url, json=bad, headers=a.headers).status_code == 422, bad


def test_retention_and_export_commands(api_deps, api_settings, make_user, tmp_path):
    """`worldmm retention run` (dry run, then for real, with --now) and `worldmm export`."""
    from typer.testing import CliRunner

    from apps.cli import app

    deps = api_deps
    a = make_user()
    old_frame, _ = capture(deps, a.user_id, OLD)
    new_frame, _ = capture(deps, a.user_id, NEW)
    with deps.db.transaction() as conn:
        update_profile(conn, a.user_id, {"retention_days": 7})
    env = {
        "WORLDMM_DATABASE_URL": api_settings.database_url,
        "WORLDMM_STATE_DIR": str(api_settings.state_dir),
        "WORLDMM_BLOB_DIR": str(api_settings.resolved_blob_dir),
    }
    run = ["retention", "run", "--user", a.user_id, "--now", NOW.isoformat()]
    out = CliRunner().invoke(app, [*run, "--dry-run"], env=env)
    assert out.exit_code == 0, out.output
    assert "2 rows of 1 users would go" in out.output and deps.blobs.exists(old_frame)
    out = CliRunner().invoke(app, run, env=env)
    assert out.exit_code == 0, out.output
    assert "deleted 2 rows and 2 blobs of 1 users" in out.output
    assert not deps.blobs.exists(old_frame) and deps.blobs.exists(new_frame)
    out = CliRunner().invoke(app, run, env=env)
    assert "deleted 0 rows and 0 blobs" in out.output  # idempotent

    archive = tmp_path / "a.tar.gz"
    out = CliRunner().invoke(app, ["export", "--user", a.user_id, "--out", str(archive)], env=env)
    assert out.exit_code == 0, out.output
    import tarfile

    with tarfile.open(archive, "r:gz") as tar:
        names = tar.getnames()
    assert f"media/{new_frame}" in names and f"media/{old_frame}" not in names
    assert "manifest.json" in names and not (tmp_path / "a.tar.gz.partial").exists()


def test_retention_deletes_a_window_container_with_its_last_capture(client, clocked, make_user):
    """The container layout (issue 26): a window's object goes once none of its captures is
    held any more; a window that straddles the cutoff keeps its object until then, and its
    expired capture already answers 410."""
    from worldmm.blobs import window_media_key
    from worldmm.media.container import Capture, build
    from worldmm.store.frames import MediaRef

    deps = clocked
    a = make_user()
    cutoff = NOW - timedelta(days=7)
    windows = {"old": cutoff - timedelta(hours=1), "straddling": cutoff - timedelta(seconds=10)}
    keys: dict[str, tuple[str, list[str]]] = {}
    for name, start in windows.items():
        at = [start, start + timedelta(seconds=20)]
        fkeys = [frame_key(a.user_id, "s1", t, i) for i, t in enumerate(at)]
        ms = int(start.timestamp() * 1000)
        caps = [Capture(k, "frames", ms + 20_000 * i, ms + 20_000 * i, JPEG, seq=i)
                for i, k in enumerate(fkeys)]  # fmt: skip
        box = build(caps)
        ckey = window_media_key(a.user_id, ms, box.digest)
        deps.blobs.put(ckey, box.data)
        rows = [
            FrameBatchRow("s1", t, i, k, media=MediaRef(ckey, e.offset, e.length))
            for (i, t), k, e in zip(enumerate(at), fkeys, box.entries, strict=True)
        ]
        with deps.db.transaction() as conn:
            frame_store.insert_frames(conn, a.user_id, rows)
        keys[name] = (ckey, fkeys)
    with deps.db.transaction() as conn:
        update_profile(conn, a.user_id, {"retention_days": 7})

    url = f"/v1/users/{a.user_id}/frames/"
    straddle_box, (expired, kept) = keys["straddling"]
    assert client.get(url + kept, headers=a.headers).status_code == 200
    done = retention.expire_user(deps.db, deps.blobs, a.user_id, cutoff, batch=1)
    assert done.rows["frames"] == 3  # both of the old window, the first of the straddling one
    assert not deps.blobs.exists(keys["old"][0])  # the old window's object is gone
    assert deps.blobs.exists(straddle_box)  # still holds a capture inside retention
    assert client.get(url + expired, headers=a.headers).status_code == 410
    r = client.get(url + kept, headers=a.headers)
    assert r.status_code == 200 and r.content == JPEG

    later = retention.expire_user(deps.db, deps.blobs, a.user_id, NOW)
    assert later.rows["frames"] == 1 and not deps.blobs.exists(straddle_box)
