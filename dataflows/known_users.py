"""Which wearers the flow serves: users the API knows (made by an admin), unless the
deployment lets the stream create them (``WORLDMM_INGEST_CREATE_USERS``).

A user id in a record is the sender's claim. Believed, every new id made a user row and
per-user state kept for ever (windows, construction, caches, metric series), so a gateway
that sent a million ids grew the flow without bound. The check reads the database once per
batch for the ids it has not seen lately; answers are cached for a short time (a user made
by the API is served within ``negative_ttl_s``), and the cache is bounded.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

Lookup = Callable[[list[str]], set[str]]
"""The ids among these that are users (one database read)."""


class KnownUsers:
    """A bounded, time-limited cache in front of :data:`Lookup` (thread-safe)."""

    def __init__(
        self,
        lookup: Lookup,
        *,
        ttl_s: float = 60.0,
        negative_ttl_s: float = 5.0,
        size: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._ttl = ttl_s
        self._negative_ttl = negative_ttl_s
        self._size = size
        self._clock = clock
        self._seen: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def known(self, user_ids: Iterable[str]) -> set[str]:
        """The ids that are users; one lookup for those not answered recently."""
        now = self._clock()
        wanted = set(user_ids)
        out: set[str] = set()
        ask: list[str] = []
        with self._lock:
            for uid in wanted:
                hit = self._seen.get(uid)
                ttl = self._ttl if hit and hit[0] else self._negative_ttl
                if hit is not None and now - hit[1] < ttl:
                    self._seen.move_to_end(uid)
                    if hit[0]:
                        out.add(uid)
                else:
                    ask.append(uid)
        if ask:
            found = self._lookup(sorted(ask))
            out |= found
            with self._lock:
                for uid in ask:
                    self._seen[uid] = (uid in found, now)
                    self._seen.move_to_end(uid)
                while len(self._seen) > self._size:
                    self._seen.popitem(last=False)
        return out
