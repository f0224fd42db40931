"""The entity lane's document frequencies: how many 30 s windows ended by ``as_of`` name each
asked entity, kept in process per user (counted in the store on every question, a housemate's
count read every window naming them: 8 ms at four weeks, growing with the memory).

Each asked entity's windows (segment -> window end) are read once; a copy over
``TERM_STATS_CHECK_S`` old adds the 30 s triples written since (by id, one index range); a
count is a binary search. Deleted or re-pointed triples show when the user's copy is read
again, every ``TERM_STATS_RECOUNT_S`` (at once when the highest id went down: a purge).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from worldmm.memory.retrieval.lanes import (
    TERM_STATS_CHECK_S,
    TERM_STATS_RECOUNT_S,
    TERM_STATS_USERS,
    keep_recent,
)
from worldmm.store import entity_links

if TYPE_CHECKING:
    from worldmm.store.db import Database


@dataclass
class _UserWindows:
    """One user's asked entities: each one's windows (segment -> window end, epoch s)."""

    upto: int  # the highest 30 s triple id the copy has seen
    checked: float
    read: float
    windows: dict[int, dict[int, float]] = field(default_factory=dict)
    ends: dict[int, np.ndarray] = field(default_factory=dict)  # sorted, rebuilt on change
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, entity: int, segment: int, end: float) -> None:
        if segment not in (known := self.windows[entity]):
            known[segment] = end
            self.ends.pop(entity, None)

    def count(self, entity: int, as_of: datetime | None) -> int:
        if (ends := self.ends.get(entity)) is None:
            ends = self.ends[entity] = np.sort(np.fromiter(self.windows[entity].values(), float))
        if as_of is None:
            return len(ends)
        return int(np.searchsorted(ends, as_of.timestamp(), side="right"))


class EntityWindowsMemo:
    """Per user (and database), the windows naming each entity a question asked about."""

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
    ) -> dict[int, int]:
        """How many 30 s windows ended by ``as_of`` name each of ``entity_ids``."""
        user = self._user(conn, db, user_id)
        with user.lock:
            now = time.monotonic()
            if now - user.checked >= TERM_STATS_CHECK_S:
                top = entity_links.base_links_top(conn, user_id)
                if top < user.upto:  # triples deleted (a purge): read every entity again
                    user.windows.clear()
                    user.ends.clear()
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
                for entity, segment, end in entity_links.base_links(conn, user_id, missing):
                    user.add(entity, segment, end)
            return {e: user.count(e, as_of) for e in entity_ids}

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


ENTITY_WINDOWS = EntityWindowsMemo()
