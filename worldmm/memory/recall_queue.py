"""Reinforcement on recall: what an answer rested on is recalled once more, later, in batches.

A reply only *adds* its evidence to an in-memory :class:`RecallQueue` (no I/O, no await), so
answering never waits for bookkeeping; a background task writes what is queued every
``recall_flush_s``, one statement per table per user. While the database is away the counts
stay queued (bounded by ``recall_max_pending``; beyond it new recalls are dropped and counted).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from worldmm import metrics
from worldmm.store.importance_recall import reinforce

if TYPE_CHECKING:
    from worldmm.agent.result import AgentResult
    from worldmm.store.db import Database

log = logging.getLogger(__name__)


def answer_evidence(result: AgentResult) -> tuple[list[int], list[int]]:
    """What an answer recalls: the segments it cites (all its evidence segments when it cites
    none) and the semantic facts it used. Nothing when no answer came."""
    if result.stopped in ("model_error", "parse_error"):
        return [], []
    segments = result.cited_segment_ids or [e.segment_id for e in result.evidence]
    return list(dict.fromkeys(segments)), [t.triple_id for t in result.triples]


@dataclass
class _Batch:
    segments: Counter[int] = field(default_factory=Counter)
    triples: Counter[int] = field(default_factory=Counter)
    at: datetime | None = None  # the latest recall in the batch

    def size(self) -> int:
        return len(self.segments) + len(self.triples)

    def merge(self, other: _Batch) -> None:
        self.segments.update(other.segments)
        self.triples.update(other.triples)
        if other.at is not None and (self.at is None or other.at > self.at):
            self.at = other.at


class RecallQueue:
    """Recalls waiting to be written, per user. :meth:`add` is safe from any thread and never
    blocks on I/O; :meth:`start` runs the flushing task on the current event loop."""

    def __init__(self, db: Database, *, flush_s: float, max_pending: int, clock=None) -> None:
        self._db = db
        self._flush_s = flush_s
        self._max = max_pending
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._pending: dict[str, _Batch] = {}
        self._task: asyncio.Task | None = None
        # asyncio objects belong to one event loop; a test client may run the app's lifespan
        # in a new loop each time, so the flush lock and the task are per loop
        self._flushing: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    def add(
        self,
        user_id: str,
        segments: Iterable[int] = (),
        triples: Iterable[int] = (),
        strength: int = 1,
    ) -> bool:
        """Queue one recall of each of ``segments`` and ``triples`` (``strength`` counts
        each); False (and counted as dropped) when the queue is full."""
        segments, triples = list(segments), list(triples)
        if not segments and not triples:
            return True
        with self._lock:
            batch = self._pending.setdefault(user_id, _Batch())
            new = len(set(segments) - batch.segments.keys()) + len(
                set(triples) - batch.triples.keys()
            )
            if new and sum(b.size() for b in self._pending.values()) + new > self._max:
                metrics.RECALLS_DROPPED.inc(len(segments) + len(triples))
                log.warning("recall_queue_full user=%s dropped=%d", user_id, new)
                return False
            for i in segments:
                batch.segments[i] += strength
            for i in triples:
                batch.triples[i] += strength
            batch.at = self._clock()
        return True

    def pending(self) -> int:
        """Distinct rows waiting to be written."""
        with self._lock:
            return sum(b.size() for b in self._pending.values())

    async def flush(self) -> int:
        """Write everything queued so far (one transaction per user); returns the rows
        changed. A user's batch whose write fails goes back into the queue and the error is
        raised after the other users' batches are written."""
        loop = asyncio.get_running_loop()
        flushing = self._flushing.setdefault(loop, asyncio.Lock())
        async with flushing:  # a flush's batches never interleave with another's
            with self._lock:
                taken, self._pending = self._pending, {}
            written, failed = 0, None
            for user_id, batch in taken.items():
                try:
                    written += await asyncio.to_thread(self._write, user_id, batch)
                except Exception as exc:  # noqa: BLE001 - requeued, raised below
                    failed = exc
                    with self._lock:
                        self._pending.setdefault(user_id, _Batch()).merge(batch)
            if failed is not None:
                raise failed
            return written

    def _write(self, user_id: str, batch: _Batch) -> int:
        with self._db.transaction() as conn:
            segs, trips = reinforce(
                conn, user_id, batch.segments, batch.triples, batch.at or self._clock()
            )
        metrics.RECALLS_WRITTEN.labels(kind="segment").inc(sum(batch.segments.values()))
        metrics.RECALLS_WRITTEN.labels(kind="triple").inc(sum(batch.triples.values()))
        return segs + trips

    def start(self) -> None:
        """Run the periodic flush on the running event loop (once)."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._flushing = {loop: self._flushing.get(loop) or asyncio.Lock()}
            self._task = loop.create_task(self._run(), name="recalls")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._flush_s)
            try:
                await self.flush()
            except Exception as exc:  # noqa: BLE001 - kept queued; the next tick retries
                log.warning("recall_flush_failed error=%s pending=%d", exc, self.pending())

    async def close(self) -> None:
        """Stop the periodic flush and write what is still queued (logged if it cannot)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            if task.get_loop() is asyncio.get_running_loop():  # else its loop is gone
                await asyncio.gather(task, return_exceptions=True)
        try:
            await self.flush()
        except Exception as exc:  # noqa: BLE001 - shutting down: nothing left to retry with
            log.error("recall_flush_at_close_failed error=%s lost=%d", exc, self.pending())
