"""Model usage per user: what every LLM call cost, for whom, recorded off the call path.

Work for one user starts under :func:`for_user` (a window's construction, a question, a
note); the roles put that user on each request they build, and the dispatcher hands the
API's reported usage (prompt, completion, cached and reasoning tokens) of every successful
call to a :class:`UsageSink`. The :class:`UsageLedger` keeps the records in memory, adds them up per
(user, minute, role, model) and writes them to PostgreSQL in batches from a background
thread, so a call never waits for the database; it also counts them in Prometheus and
answers the per-user daily token budget (:meth:`UsageLedger.over_budget`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from worldmm import metrics

if TYPE_CHECKING:
    from worldmm.store.db import Database

log = logging.getLogger("worldmm.llm.usage_ledger")

_USER: ContextVar[str | None] = ContextVar("worldmm_usage_user", default=None)
# Records held while PostgreSQL is unreachable before the oldest are dropped (and logged).
MAX_PENDING = 100_000


@contextmanager
def for_user(user_id: str) -> Iterator[None]:
    """Model calls made inside this block (tasks and threads started in it too) are
    ``user_id``'s usage."""
    token = _USER.set(user_id)
    try:
        yield
    finally:
        _USER.reset(token)


def current_user() -> str | None:
    """The user whose work is running here; None outside :func:`for_user`."""
    return _USER.get()


@dataclass(frozen=True)
class UsageRecord:
    """One call's usage as the provider reported it."""

    at: datetime
    user_id: str | None
    role: str
    model: str
    provider: str
    dispatch: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # of prompt_tokens
    reasoning_tokens: int = 0  # of completion_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class UsageSink(Protocol):
    def record(self, rec: UsageRecord) -> None: ...


@dataclass(frozen=True)
class UsageKey:
    """A row of ``llm_usage``: one user's calls of one role and model in one minute."""

    user_id: str | None
    minute: datetime
    role: str
    model: str
    provider: str
    dispatch: str


def aggregate(records: list[UsageRecord]) -> dict[UsageKey, Counter[str]]:
    """Records added up per :class:`UsageKey` (calls and the four token counts)."""
    rows: dict[UsageKey, Counter[str]] = defaultdict(Counter)
    for r in records:
        minute = r.at.astimezone(UTC).replace(second=0, microsecond=0)
        key = UsageKey(r.user_id, minute, r.role, r.model, r.provider, r.dispatch)
        rows[key].update(
            calls=1,
            prompt=r.prompt_tokens,
            completion=r.completion_tokens,
            cached=r.cached_tokens,
            reasoning=r.reasoning_tokens,
        )
    return rows


def day_start(at: datetime) -> datetime:
    """Midnight UTC of ``at``'s day: budgets are per UTC day."""
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


class NullUsage:
    """Counts calls in Prometheus only (tests and tools without a database)."""

    daily_budget = 0

    def record(self, rec: UsageRecord) -> None:
        count(rec)

    def over_budget(self, user_id: str) -> bool:
        return False

    def used_today(self, user_id: str) -> int:
        return 0

    def flush(self) -> int:
        return 0

    def close(self) -> None:
        pass


def count(rec: UsageRecord) -> None:
    tokens = metrics.LLM_TOKENS
    for kind, n in (
        ("prompt", rec.prompt_tokens),
        ("completion", rec.completion_tokens),
        ("cached", rec.cached_tokens),
        ("reasoning", rec.reasoning_tokens),
    ):
        tokens.labels(role=rec.role, provider=rec.provider, kind=kind).inc(n)
        if rec.user_id is not None:
            user = metrics.USER_LABEL(rec.user_id)
            metrics.USER_TOKENS.labels(user_id=user, kind=kind).inc(n)


@dataclass
class _DayTotal:
    day: datetime
    stored: int  # the user's tokens of that day in the database when last read
    read_at: float  # monotonic time of that read
    since: int = 0  # tokens this process recorded for the user after that read


@dataclass(eq=False)
class UsageLedger:
    """Buffers usage records and writes them to ``llm_usage`` every ``flush_s`` (or sooner
    when ``batch`` are waiting); a failed write keeps them for the next try. ``daily_budget``
    tokens per user and UTC day (0: none) are checked against the database's total, re-read
    at most every ``refresh_s``, plus what this process recorded since."""

    db: Database
    _: KW_ONLY
    flush_s: float
    daily_budget: int = 0
    refresh_s: float = 30.0
    batch: int = 5000
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    monotonic: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _flush_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _pending: list[UsageRecord] = field(default_factory=list, init=False, repr=False)
    _days: dict[str, _DayTotal] = field(default_factory=dict, init=False, repr=False)
    _wake: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    # --- recording (the call path: memory only) ------------------------------------------
    def record(self, rec: UsageRecord) -> None:
        count(rec)
        with self._lock:
            self._pending.append(rec)
            if len(self._pending) > MAX_PENDING:
                dropped = len(self._pending) - MAX_PENDING
                del self._pending[:dropped]
                log.error("usage_dropped records=%d (database unreachable too long)", dropped)
            total = self._days.get(rec.user_id or "")
            if total is not None and total.day == day_start(rec.at):
                total.since += rec.total_tokens
            full = len(self._pending) >= self.batch
        self._ensure_thread()
        if full:
            self._wake.set()

    # --- writing ---------------------------------------------------------------------------
    def flush(self) -> int:
        """Write what is buffered; returns the records written (0 when the write failed:
        they stay buffered)."""
        from worldmm.store.llm_usage import add_usage

        with self._flush_lock:
            with self._lock:
                todo, self._pending = self._pending, []
            if not todo:
                return 0
            try:
                with self.db.transaction() as conn:
                    add_usage(conn, aggregate(todo))
            except Exception as exc:  # noqa: BLE001 - kept for the next flush, never lost here
                with self._lock:
                    self._pending[:0] = todo
                log.warning("usage_flush_failed records=%d error=%s", len(todo), exc)
                return 0
            return len(todo)

    def _ensure_thread(self) -> None:
        if self._thread is None and not self._stop.is_set():
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="worldmm-usage", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_s)
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        """Stop the writer and write what is left (call before closing the database)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.flush()

    # --- the daily budget ------------------------------------------------------------------
    def used_today(self, user_id: str) -> int:
        """Tokens of ``user_id`` today (UTC) as far as this process knows: the database's
        total (re-read at most every ``refresh_s``) plus this process's records since."""
        from worldmm.store.llm_usage import tokens_since

        today = day_start(self.now())
        with self._lock:
            total = self._days.get(user_id)
        stale = total is None or total.day != today
        if stale or self.monotonic() - total.read_at >= self.refresh_s:
            self.flush()  # what this process recorded is in the total it reads
            read_at = self.monotonic()
            with self.db.connection() as conn:
                stored = tokens_since(conn, user_id, today, today + timedelta(days=1))
            total = _DayTotal(today, stored, read_at)
            with self._lock:
                self._days[user_id] = total
        return total.stored + total.since

    def over_budget(self, user_id: str) -> bool:
        """True when ``user_id`` has a budget and today's tokens reached it."""
        return self.daily_budget > 0 and self.used_today(user_id) >= self.daily_budget
