"""Forgetting a time range and purging a user: database rows, blobs, cached graphs.

Order matters. A forget records its range and deletes the rows in one transaction, under
the wearer's forget lock (worldmm/store/forgotten.py): the flow, late captures, retrigger
and replay read the range and never write it again. The blobs those rows pointed at are
queued in the same transaction and deleted after it (worldmm/privacy/forget_media.py):
containers that keep other captures are written again without the forgotten ones, and a
blob store that is down keeps them queued for the sweeper. Summaries some of whose windows
remain are rebuilt from those windows. Cached graphs hold the forgotten names and facts, so
neither a forget nor a purge leaves them until the next rebuild: the user's Redis keys are
tombstoned before the rows are deleted (a graph rebuilt from the old rows cannot be stored)
and again (forget) or swept (purge) after, and this process's graph memo drops the user.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime

import anyio.from_thread
import redis

from worldmm.blobs import BlobKeyError, user_prefixes
from worldmm.deps import Deps
from worldmm.graph.cache import cache_key
from worldmm.memory.rebuild import rebuild_summaries
from worldmm.privacy.forget_media import drain
from worldmm.store import blob_deletions
from worldmm.store.forgotten import lock_forget, record_forgotten
from worldmm.store.purge import forget_range, purge_user
from worldmm.store.users import user_exists

log = logging.getLogger("query_api.forget")


@dataclass
class ForgetOutcome:
    rows: dict[str, int]
    blobs: int
    blobs_pending: int = 0  # queued: the blob store failed; the sweeper retries them
    summaries_rebuilt: int = 0


@dataclass
class PurgeOutcome:
    rows: dict[str, int]
    blobs: int
    cache_keys: int
    blobs_pending: int = 0


def forget(deps: Deps, user_id: str, start: datetime, end: datetime) -> ForgetOutcome:
    deps.cache.purge_user(user_id)
    with deps.db.transaction() as conn:
        lock_forget(conn, user_id, exclusive=True)  # windows being built wait, then see it
        record_forgotten(conn, user_id, start, end)
        result = forget_range(conn, user_id, start, end, keep_summaries=True)
        blob_deletions.enqueue(
            conn,
            user_id,
            [(k, "object") for k in [*result.frame_blob_keys, *result.audio_blob_keys]]
            + [(k, "container") for k in result.touched_media],
        )
    # a rebuild that read the old rows between the first tombstone and the commit holds the
    # first tombstone's token: a fresh tombstone makes its write fail
    cached = deps.cache.purge_user(user_id) + deps.graphs.drop_user(user_id)
    drained = drain(deps.db, deps.blobs, user_id)
    rebuilt = _on_the_loop(rebuild_summaries, deps, user_id, result.rebuild)
    log.info(
        "api.forget user=%s start=%s end=%s rows=%s blobs=%d blobs_pending=%d "
        "summaries_rebuilt=%d cached_graphs=%d",
        user_id,
        start.isoformat(),
        end.isoformat(),
        result.counts,
        drained.blobs,
        drained.left,
        rebuilt,
        cached,
    )
    return ForgetOutcome(result.counts, drained.blobs, drained.left, rebuilt)


def _on_the_loop(fn, *args):
    """Await ``fn(*args)`` on the API's event loop (where its model clients live) from the
    worker thread a route runs this module in; its own loop when there is none (a script)."""
    try:
        return anyio.from_thread.run(fn, *args)
    except RuntimeError as exc:
        if "AnyIO worker thread" not in str(exc):
            raise
    return asyncio.run(fn(*args))


def user_cache_pattern(user_id: str) -> str:
    """Glob matching every graph cache key of the user (escaped as the cache escapes it)."""
    return cache_key(user_id, "x").rsplit(":", 1)[0] + ":*"


def sweep_cache(client: redis.Redis | None, user_id: str) -> int:
    """Delete every graph cache key of the user; returns how many there were."""
    if client is None:
        return 0
    keys = list(client.scan_iter(match=user_cache_pattern(user_id), count=500))
    if keys:
        client.delete(*keys)
    return len(keys)


def purge(deps: Deps, user_id: str) -> PurgeOutcome | None:
    """Delete everything of the user; None when there is no such user. A purge asked again
    after its rows went (its blobs waited for the store) finishes the blobs."""
    with deps.db.connection() as conn:
        exists = user_exists(conn, user_id)
        queued = blob_deletions.pending(conn, user_id, 1)
    if not exists and not queued:
        return None  # and no tombstones written for a user that never was
    rows: dict[str, int] = {}
    if exists:
        deps.cache.purge_user(user_id)  # tombstones: an in-flight rebuild cannot store old data
        try:
            prefixes = user_prefixes(user_id)
        except BlobKeyError:
            prefixes = []  # an id that can never have had blobs (not a safe path segment)
        with deps.db.transaction() as conn:
            rows = purge_user(conn, user_id)
            blob_deletions.enqueue(conn, user_id, [(p, "prefix") for p in prefixes])
    drained = drain(deps.db, deps.blobs, user_id)
    swept = sweep_cache(deps.redis, user_id)
    deps.graphs.drop_user(user_id)  # the query process's memo holds the graphs in memory
    log.info(
        "api.purge user=%s rows=%s blobs=%d blobs_pending=%d cache_keys=%d",
        user_id,
        rows,
        drained.blobs,
        drained.left,
        swept,
    )
    return PurgeOutcome(rows, drained.blobs, swept, drained.left)
