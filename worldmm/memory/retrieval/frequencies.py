"""Per-user document frequencies kept in this process, what the lexical and entity lanes
weigh by (IDF): the term statistics of the user's segments (:class:`TermStatsMemo`), and the
30 s windows naming each entity a question asked about (:class:`EntityWindowsMemo`).

Each is counted once, then brought up to date with what was written since (a question need not
pay a count over its whole memory), and read whole again now and then, so edits show too. One
of each lives in the dependency bundle (``Deps.term_stats``, ``Deps.entity_windows``), shared by
its copies, and is read through the bundle's reader.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from worldmm.models import BASE_SCALE
from worldmm.store import entity_links
from worldmm.store import term_stats as ts

if TYPE_CHECKING:
    from worldmm.store.db import Database

log = logging.getLogger(__name__)

# A live question's words may be in the window written a moment ago: a copy this old is
# checked for new segments (two index reads), and what changed is counted.
TERM_STATS_CHECK_S = 2.0
# Edits to counted segments show in a whole recount, made this often in the background.
TERM_STATS_RECOUNT_S = 1800.0
TERM_STATS_USERS = 256


@dataclass
class _Kept:
    stats: ts.TermStats
    covered: ts.Coverage
    checked: float  # when the store was last asked what changed
    counted: float  # when every segment was last counted
    recounting: bool = False


def _in_thread(job: Callable[[], None]) -> None:
    threading.Thread(target=job, name="term-stats-recount", daemon=True).start()


class TermStatsMemo:
    """Per user (and database), the term statistics the lexical and entity lanes weigh by,
    kept in process: counted whole once, then brought up to date with the segments completed
    since (a question need not pay a count over its whole memory), and recounted whole in the
    background every ``TERM_STATS_RECOUNT_S``. ``spawn`` runs that recount (tests run it at
    once)."""

    def __init__(
        self,
        max_users: int = TERM_STATS_USERS,
        spawn: Callable[[Callable[[], None]], None] = _in_thread,
    ) -> None:
        self._lock = threading.Lock()
        self._max = max_users
        self._spawn = spawn
        self._entries: OrderedDict[tuple[int, str], _Kept] = OrderedDict()

    def get(self, conn, db: Database, user_id: str) -> ts.TermStats:
        key = (id(db), user_id)
        now = time.monotonic()
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None:
                self._entries.move_to_end(key)
                if now - kept.checked < TERM_STATS_CHECK_S:
                    return kept.stats
        covered = ts.coverage(conn, user_id)
        if kept is None or covered.upto < kept.covered.upto:  # new, or its segments deleted
            stats = ts.read_since(conn, user_id, ts.NOTHING, covered)
            self._put(key, _Kept(stats, covered, now, now))
            return stats
        stats = kept.stats
        if covered != kept.covered:
            stats = ts.merge(stats, ts.read_since(conn, user_id, kept.covered, covered))
        recount = now - kept.counted >= TERM_STATS_RECOUNT_S and not kept.recounting
        self._put(key, _Kept(stats, covered, now, kept.counted, kept.recounting or recount))
        if recount:
            self._spawn(lambda: self._recount(db, key, user_id))
        return stats

    def _recount(self, db: Database, key: tuple[int, str], user_id: str) -> None:
        started = time.monotonic()
        try:
            with db.connection() as conn:
                stats, covered = ts.read_all(conn, user_id)
        except Exception as exc:  # the kept copy serves on; the next check tries again
            log.warning("retrieval.term_stats_recount_failed user=%s error=%s", user_id, exc)
            with self._lock:
                if (kept := self._entries.get(key)) is not None:
                    kept.recounting = False
            return
        self._put(key, _Kept(stats, covered, started, started))

    def _put(self, key: tuple[int, str], kept: _Kept) -> None:
        with self._lock:
            keep_recent(self._entries, key, kept, self._max)


def keep_recent(entries: OrderedDict, key, value, limit: int) -> None:
    """Store ``value`` as the most recent entry; the least recent leave past ``limit``."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > limit:
        entries.popitem(last=False)


# --- the entity lane's document frequencies -----------------------------------------------
# A common entity (a housemate, "table") names thousands of windows a month, and reading all of
# them the first time it was asked made the slowest tenth of four-week searches (docs/
# benchmarks/query.md). So the first read takes each entity's newest ``WINDOW_COUNT_CAP``
# links per side. An entity whose read stopped there is *sampled*: its windows after the
# cutoff (the later of its full sides' last times) are known and counted, and its windows
# before the cutoff are estimated from its rate among the wearer's windows after it
# (:func:`estimate`). Every other entity's count is exact. An IDF moves little
# with the count of a common entity; it is a rare one's count that must be, and is, exact.
WINDOW_COUNT_CAP = 1024


def estimate(known_ends: np.ndarray, cutoff: float, base_ends: np.ndarray, at: float) -> int:
    """A sampled entity's windows ended by ``at``: ``known_ends`` (sorted) are its windows
    after ``cutoff``, ``base_ends`` (sorted) every 30 s window's end. Those known to have
    ended by ``at``, plus its rate among all windows after the cutoff times the windows of the
    unread span (at or before the cutoff) ended by ``at``; at most every window."""
    total = int(np.searchsorted(base_ends, at, side="right"))
    unread = int(np.searchsorted(base_ends, min(at, cutoff), side="right"))
    read = len(base_ends) - int(np.searchsorted(base_ends, cutoff, side="right"))
    rate = len(known_ends) / read if read > 0 else 0.0
    held = int(np.searchsorted(known_ends, at, side="right"))
    return min(total, int(held + rate * unread + 0.5))


@dataclass
class _UserWindows:
    """One user's asked entities: each one's windows (segment -> window end, epoch s), and
    the cutoff of each sampled one (its windows at or before it are not read)."""

    upto: int  # the highest 30 s triple id the copy has seen
    checked: float
    read: float
    windows: dict[int, dict[int, float]] = field(default_factory=dict)
    ends: dict[int, np.ndarray] = field(default_factory=dict)  # sorted, rebuilt on change
    cutoffs: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, entity: int, segment: int, end: float) -> None:
        if end <= self.cutoffs.get(entity, float("-inf")):
            return  # in the unread span of a sampled entity
        if segment not in (known := self.windows[entity]):
            known[segment] = end
            self.ends.pop(entity, None)

    def take_newest(self, read: Mapping[int, entity_links.NewestWindows]) -> None:
        """The newest windows of entities read for the first time."""
        for entity, got in read.items():
            if got.cutoff is not None:
                self.cutoffs[entity] = got.cutoff
            for segment, end in zip(got.segments, got.ends, strict=True):
                self.add(entity, segment, end)

    def count(self, entity: int, as_of: datetime | None, base_ends: np.ndarray) -> int:
        if (ends := self.ends.get(entity)) is None:
            ends = self.ends[entity] = np.sort(np.fromiter(self.windows[entity].values(), float))
        at = float("inf") if as_of is None else as_of.timestamp()
        if (cutoff := self.cutoffs.get(entity)) is not None:
            return estimate(ends, cutoff, base_ends, at)
        return int(np.searchsorted(ends, at, side="right"))


class EntityWindowsMemo:
    """Per user (and database), the windows naming each entity a question asked about, for
    how many 30 s windows ended by ``as_of`` name it. Each asked entity's newest windows
    (segment -> window end) are read once, at most ``WINDOW_COUNT_CAP`` links per side (a
    common entity's count is then estimated, above); a copy over ``TERM_STATS_CHECK_S`` old
    adds the 30 s triples written since (by id, one index range); a count is a binary
    search. Deleted or re-pointed triples show when the user's copy is read again, every
    ``TERM_STATS_RECOUNT_S`` (at once when the highest id went down: a purge)."""

    def __init__(self, max_users: int = TERM_STATS_USERS) -> None:
        self._lock = threading.Lock()
        self._max = max_users
        self._users: OrderedDict[tuple[int, str], _UserWindows] = OrderedDict()

    def counts(
        self,
        conn,
        db: Database,
        user_id: str,
        entity_ids: Sequence[int],
        as_of: datetime | None,
        base_ends: np.ndarray,
    ) -> dict[int, int]:
        """How many 30 s windows ended by ``as_of`` name each of ``entity_ids``
        (``base_ends``: the ends of the user's 30 s windows, sorted)."""
        user = self._user(conn, db, user_id)
        with user.lock:
            now = time.monotonic()
            if now - user.checked >= TERM_STATS_CHECK_S:
                top = entity_links.base_links_top(conn, user_id)
                if top < user.upto:  # triples deleted (a purge): read every entity again
                    user.windows.clear()
                    user.ends.clear()
                    user.cutoffs.clear()
                elif top > user.upto:
                    for subj, obj, segment, end in entity_links.base_links_since(
                        conn, user_id, user.upto, top
                    ):
                        for entity in (subj, obj):
                            if entity in user.windows:
                                user.add(entity, segment, end)
                user.upto, user.checked = top, now
            if missing := sorted({e for e in entity_ids if e not in user.windows}):
                for e in missing:
                    user.windows[e] = {}
                # rows written after ``upto`` may come twice (here and in the next delta):
                # one window per segment either way
                read = entity_links.newest_windows(
                    conn, user_id, missing, WINDOW_COUNT_CAP, BASE_SCALE
                )
                user.take_newest(read)
            return {e: user.count(e, as_of, base_ends) for e in entity_ids}

    def _user(self, conn, db: Database, user_id: str) -> _UserWindows:
        key, now = (id(db), user_id), time.monotonic()
        with self._lock:
            user = self._users.get(key)
            if user is not None:
                self._users.move_to_end(key)
                if now - user.read < TERM_STATS_RECOUNT_S:
                    return user
        top = entity_links.base_links_top(conn, user_id)  # before any row is read
        fresh = _UserWindows(upto=top, checked=now, read=now)
        with self._lock:
            keep_recent(self._users, key, fresh, self._max)
        return fresh
