"""What the store keeps outside a window's build: a control record (a session's start or
end, a privacy pause or resume) and a capture that missed its window."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldmm.media import window as window_media
from worldmm.memory.forget_fence import ForgetFence, ForgottenMeanwhile
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.windows import ms_to_dt
from worldmm.store import blob_deletions
from worldmm.store import frames as frame_store
from worldmm.store import privacy as privacy_store
from worldmm.store import users as user_store
from worldmm.store.models import AudioChunkRow, FrameRow

if TYPE_CHECKING:
    from worldmm.deps import Deps


def record_session(deps: Deps, msg) -> None:
    """A control message in the store: a session's start/end times, or a privacy pause
    (a session's end also ends its open pauses)."""
    start = msg.ts if msg.event == "session_start" else None
    end = msg.ts if msg.event == "session_end" else None
    with deps.db.transaction() as conn:
        if deps.settings.ingest_create_users:
            user_store.ensure_user(conn, msg.user_id)
        elif not user_store.lock_user(conn, msg.user_id):
            return  # purged since the flow let it in: never made again
        user_store.upsert_session(conn, msg.user_id, msg.session_id, start, end)
        if msg.event == "pause":
            privacy_store.record_pause(conn, msg.user_id, msg.session_id, msg.ts)
        elif msg.event in ("resume", "session_end"):
            privacy_store.end_pauses(conn, msg.user_id, msg.session_id, msg.ts)


def record_late(deps: Deps, user_id: str, item) -> bool:
    """Keep a capture that missed its window (timestamp retrieval still finds it): stored
    alone under its own key (its window's container is written already), a frame with its
    faces blurred as in a window, then its row; False (nothing kept) when it lies in a
    range the wearer forgot, also one forgotten while it was stored. Raises OSError
    (BlobStoreError) when the blob store fails."""
    fence = ForgetFence.read(deps, user_id, item.ts_ms, max(item.end_ms, item.ts_ms + 1))
    if fence.purged or fence.forgets(item):
        return False
    data = getattr(item.ref, "data", None)
    if data is not None:
        if item.kind == "frames":
            blur = deps.faces.transform(user_id) if deps.faces is not None else None
            data = (blur or window_media.keep_frame)(window_media.capture_of(item, data))
        deps.blobs.put(item.ref.blob_key, data)
    with deps.db.transaction() as conn:
        try:
            fence.check(conn)
        except ForgottenMeanwhile:  # its bytes were stored a moment too early: they go
            blob_deletions.enqueue(conn, user_id, [(item.ref.blob_key, "object")])
            return False
        user_store.ensure_user(conn, user_id)
        if item.kind == "frames":
            frame_store.insert_frame(
                conn,
                FrameRow(
                    user_id=user_id,
                    session_id=item.session_id,
                    captured_at=ms_to_dt(item.ts_ms),
                    seq=item.ref.seq,
                    blob_key=item.ref.blob_key,
                    late=True,
                ),
            )
        else:
            frame_store.insert_audio_chunk(conn, audio_row(user_id, item, late=True))
    return True


def audio_row(user_id: str, item, *, late: bool = False) -> AudioChunkRow:
    ref: CaptureRef = item.ref
    return AudioChunkRow(
        user_id=user_id,
        session_id=item.session_id,
        started_at=ms_to_dt(item.ts_ms),
        duration_ms=item.end_ms - item.ts_ms,
        sample_rate=ref.sample_rate,
        codec="wav",
        blob_key=ref.blob_key,
        late=late,
    )
