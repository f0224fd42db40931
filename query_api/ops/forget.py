"""Forgetting a time range and purging a user: database rows, blobs, cached graphs.

Order matters. Rows go first, in one transaction (after it commits nothing can be read
back); then the blobs they pointed at. Cached graphs hold the forgotten names and facts, so
neither a forget nor a purge leaves them until the next rebuild: the user's Redis keys are
tombstoned before the rows are deleted (a graph rebuilt from the old rows cannot be stored)
and again (forget) or swept (purge) after, and this process's graph memo drops the user.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import redis

from worldmm.blobs import BlobKeyError, BlobStore, user_prefixes
from worldmm.deps import Deps
from worldmm.graph.cache import cache_key
from worldmm.store.purge import forget_range, purge_user
from worldmm.store.users import user_exists

log = logging.getLogger("query_api.forget")


@dataclass
class ForgetOutcome:
    rows: dict[str, int]
    blobs: int


@dataclass
class PurgeOutcome:
    rows: dict[str, int]
    blobs: int
    cache_keys: int


def forget(deps: Deps, user_id: str, start: datetime, end: datetime) -> ForgetOutcome:
    deps.cache.purge_user(user_id)
    with deps.db.transaction() as conn:
        result = forget_range(conn, user_id, start, end)
    # a rebuild that read the old rows between the first tombstone and the commit holds the
    # first tombstone's token: a fresh tombstone makes its write fail
    cached = deps.cache.purge_user(user_id) + deps.graphs.drop_user(user_id)
    blobs = delete_blobs(deps.blobs, [*result.frame_blob_keys, *result.audio_blob_keys])
    # a container's key is a prefix of nothing but itself
    blobs += sum(deps.blobs.delete_prefix(key) for key in result.media_keys)
    log.info(
        "api.forget user=%s start=%s end=%s rows=%s blobs=%d cached_graphs=%d",
        user_id,
        start.isoformat(),
        end.isoformat(),
        result.counts,
        blobs,
        cached,
    )
    return ForgetOutcome(result.counts, blobs)


def delete_blobs(store: BlobStore, keys: list[str]) -> int:
    """Delete exactly these blobs. The store deletes by prefix only, so a directory whose
    every blob goes is deleted at once, and single keys otherwise (a full key is a prefix of
    nothing else: keys end in their extension)."""
    by_dir: dict[str, set[str]] = defaultdict(set)
    for key in keys:
        by_dir[key.rsplit("/", 1)[0] + "/"].add(key)
    deleted = 0
    for prefix, wanted in by_dir.items():
        present = set(store.list(prefix))
        if present and present <= wanted:
            deleted += store.delete_prefix(prefix)
        else:
            deleted += sum(store.delete_prefix(k) for k in sorted(wanted & present))
    return deleted


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
    """Delete everything of the user; None when there is no such user."""
    with deps.db.connection() as conn:
        if not user_exists(conn, user_id):
            return None  # and no tombstones written for a user that never was
    deps.cache.purge_user(user_id)  # tombstones: an in-flight rebuild cannot store old data
    with deps.db.transaction() as conn:
        rows = purge_user(conn, user_id)
    blobs = 0
    try:
        prefixes = user_prefixes(user_id)
    except BlobKeyError:
        prefixes = []  # an id that can never have had blobs (not a safe path segment)
    for prefix in prefixes:
        blobs += deps.blobs.delete_prefix(prefix)
    swept = sweep_cache(deps.redis, user_id)
    deps.graphs.drop_user(user_id)  # the query process's memo holds the graphs in memory
    log.info("api.purge user=%s rows=%s blobs=%d cache_keys=%d", user_id, rows, blobs, swept)
    return PurgeOutcome(rows, blobs, swept)
