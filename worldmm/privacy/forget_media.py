"""Forgotten bytes leave the blob store, whatever the store's state when they were forgotten.

A forget (or a purge) queues, in the transaction that deletes the rows, every blob those
rows pointed at (:mod:`worldmm.store.blob_deletions`). Working the queue makes the store hold
no more than rows point at: a capture stored alone goes once no row names it; a window's
container goes once no row points into it, and one some of whose captures remain is written
again with those alone (a new object, the rows re-pointed, the old one deleted); a purged
user's prefixes go whole. A queue row is removed only after the store confirmed, so a store
that is down keeps it for the next try (:class:`DeletionSweeper` retries while any wait).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from worldmm.blobs import BlobNotFound, BlobStore, window_media_key
from worldmm.media.container import Capture, build, payload, read_index
from worldmm.store import blob_deletions as queue
from worldmm.store.blob_deletions import Deletion
from worldmm.store.db import Database
from worldmm.store.forgotten import lock_forget
from worldmm.store.purge import WINDOW_MS, ms_to_dt

log = logging.getLogger("worldmm.privacy.forget_media")


@dataclass
class Drained:
    done: int = 0  # queue items settled
    left: int = 0  # still queued (the store failed)
    blobs: int = 0  # objects deleted from the store


def _window_start(container_key: str) -> int:
    """A container's window start, from its key: ``media/<user>/<start ms>-<digest>.wmc``."""
    return int(container_key.rsplit("/", 1)[1].split("-", 1)[0])


class BlobStoreLater(OSError):
    """Not done yet: try again later (kept queued)."""


def settle(db: Database, blobs: BlobStore, item: Deletion) -> int:
    """Make the store hold of ``item`` only what rows point at; returns the objects deleted.
    OSError (BlobStoreError) when the store fails: the caller keeps the item queued."""
    user, key = item.user_id, item.key
    if item.kind == "prefix":
        return blobs.delete_prefix(key)
    if item.kind == "object":
        with db.connection() as conn:
            named = queue.capture_rows_exist(conn, user, key)
        return 0 if named else blobs.delete_prefix(key)  # a full key: itself alone
    start = _window_start(key)
    lo, hi = ms_to_dt(start - WINDOW_MS), ms_to_dt(start + 2 * WINDOW_MS)
    with db.connection() as conn:
        kept = queue.container_rows(conn, user, key, lo, hi)
    if not kept:
        return blobs.delete_prefix(key)
    try:
        data = blobs.get(key)
    except BlobNotFound:
        return 0  # gone already; nothing of it can be served
    entries = read_index(data)
    if {e.key for e in entries} <= kept:
        return 0  # nothing forgotten inside
    captures = [
        Capture(
            key=e.key,
            kind=e.kind,
            ts_ms=e.ts_ms,
            end_ms=e.end_ms,
            seq=e.seq,
            sample_rate=e.sample_rate,
            content_type=e.content_type,
            data=payload(data, e),
        )
        for e in entries
        if e.key in kept
    ]
    rewritten = build(captures)
    new_key = window_media_key(user, start, rewritten.digest)
    blobs.put(new_key, rewritten.data)
    refs = {e.key: (new_key, e.offset, e.length) for e in rewritten.entries}
    with db.transaction() as conn:
        lock_forget(conn, user, exclusive=True)  # no window re-points these rows meanwhile
        queue.repoint(conn, user, key, refs)
        left = queue.container_rows(conn, user, key, lo, hi)
    if left:  # rows that came meanwhile still point into it: the next try rewrites again
        raise BlobStoreLater(f"{key}: {len(left)} rows still point into it")
    return blobs.delete_prefix(key)


def drain(db: Database, blobs: BlobStore, user_id: str | None = None, limit: int = 500) -> Drained:
    """Work the queue (one user's, or every waiting user's) until it is empty or the store
    fails; what failed stays queued, with its error."""
    out = Drained()
    if user_id is None:
        with db.connection() as conn:
            users = queue.waiting_users(conn)
    else:
        users = [user_id]
    for user in users:
        with db.connection() as conn:
            items = queue.pending(conn, user, limit)
        for i, item in enumerate(items):
            try:
                out.blobs += settle(db, blobs, item)
            except OSError as exc:
                with db.transaction() as conn:
                    queue.failed(conn, user, item.key, f"{type(exc).__name__}: {exc}")
                log.warning("blob_deletion_failed user=%s key=%s error=%s", user, item.key, exc)
                out.left += len(items) - i  # the store is failing: try again later
                break
            with db.transaction() as conn:
                queue.done(conn, user, item.key)
            out.done += 1
    return out


class DeletionSweeper:
    """Works the queue every ``interval_s`` in a daemon thread while the process runs: a
    deletion that failed (the store was down) is retried until it is done."""

    def __init__(self, db: Database, blobs: BlobStore, interval_s: float = 30.0) -> None:
        self.db, self.blobs, self.interval_s = db, blobs, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="worldmm-blob-deletions", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                drain(self.db, self.blobs)
            except Exception as exc:  # noqa: BLE001 - a database outage: next round
                log.warning("blob_deletions_sweep_failed error=%r", exc)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
