"""Retention of raw media: frames and audio older than a user's retention are deleted, blob
and row; captions, transcripts, facts and visual embeddings stay.

``worldmm retention run`` applies it (from cron or a Kubernetes CronJob); the API applies it on
read (:func:`is_expired`: an expired frame answers 410 even before the run deleted it).

Idempotent and resumable: work goes in batches, oldest first, and each batch deletes its
blobs before its rows commit. A run stopped anywhere leaves only rows whose blob may already
be gone (the next run finds them again, and deleting a missing blob is a no-op), never a
blob without a row. A capture stored alone goes with its row; a window's container (issue
26) goes once no row points into it any more, so a window that straddles the cutoff keeps
its container until its last capture expires (at most 30 s of capture time later; the API
already answers 410 for the expired ones).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from worldmm import metrics
from worldmm.store.admin_audit import record_admin_action
from worldmm.store.privacy import (
    MediaTable,
    count_expired_media,
    delete_media_rows,
    expired_media,
    retention_days_of,
)
from worldmm.store.purge import unreferenced_media
from worldmm.store.users import get_profile

if TYPE_CHECKING:
    from worldmm.blobs import BlobStore
    from worldmm.store.db import Database

log = logging.getLogger("worldmm.retention")

TABLES: tuple[MediaTable, ...] = ("frames", "audio_chunks")


def cutoff(now: datetime, days: int) -> datetime:
    """Media that ended before this are expired."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now - timedelta(days=days)


def user_cutoff(
    db: Database, user_id: str, default_days: int | None, now: datetime
) -> datetime | None:
    """The user's retention cutoff at ``now`` (their own retention, else ``default_days``);
    None when their media are kept."""
    with db.connection() as conn:
        profile = get_profile(conn, user_id)
    days = (profile.retention_days if profile else None) or default_days
    return None if days is None else cutoff(now, days)


@dataclass
class UserRetention:
    user_id: str
    cutoff: datetime
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    blobs: int = 0

    @property
    def deleted(self) -> int:
        return sum(self.rows.values())


Progress = Callable[[str, int], None]
"""Told (user id, rows just deleted) after every batch."""


def expire_user(
    db: Database,
    blobs: BlobStore,
    user_id: str,
    limit: datetime,
    *,
    batch: int = 500,
    progress: Progress | None = None,
) -> UserRetention:
    """Delete every frame and audio chunk of the user that ended before ``limit``."""
    if batch < 1:
        raise ValueError("batch must be ≥ 1")
    done = UserRetention(user_id, limit)
    for table in TABLES:
        while True:
            with db.transaction() as conn:
                rows = expired_media(conn, table, user_id, limit, batch)
                if not rows:
                    break
                # blobs first: a crash here leaves rows the next run deletes again
                alone = [r.blob_key for r in rows if r.media_key is None]
                files = sum(blobs.delete_prefix(k) for k in alone)
                deleted = delete_media_rows(conn, table, user_id, [r.id for r in rows])
                # a window's container goes with the last of its captures (a key is a prefix
                # of nothing but itself)
                held = {r.media_key for r in rows if r.media_key}
                containers = unreferenced_media(conn, user_id, held)
                files += sum(blobs.delete_prefix(k) for k in containers)
            done.rows[table] += deleted
            done.blobs += files
            metrics.RETENTION_DELETED.labels(table).inc(deleted)
            metrics.RETENTION_DELETED.labels("blobs").inc(files)
            if progress is not None:
                progress(user_id, deleted)
    if done.deleted:
        with db.transaction() as conn:
            record_admin_action(
                conn,
                "retention.expire",
                actor="retention",
                subject_user=user_id,
                detail={"cutoff": limit.isoformat(), "rows": done.rows, "blobs": done.blobs},
            )
    log.info(
        "retention.user user=%s cutoff=%s rows=%s blobs=%d",
        user_id,
        limit.isoformat(),
        done.rows,
        done.blobs,
    )
    return done


def plan(
    db: Database, default_days: int | None, now: datetime, users: list[str] | None = None
) -> dict[str, datetime]:
    """Each user whose media expire (of ``users``, or all), with their cutoff at ``now``."""
    with db.connection() as conn:
        days = retention_days_of(conn, default_days)
    if users is not None:
        wanted = set(users)
        days = {u: d for u, d in days.items() if u in wanted}
    return {user: cutoff(now, d) for user, d in days.items()}


def count_expired(db: Database, user_id: str, limit: datetime) -> int:
    """How many rows a run would delete for the user (the progress bar's total)."""
    with db.connection() as conn:
        return sum(count_expired_media(conn, t, user_id, limit) for t in TABLES)
