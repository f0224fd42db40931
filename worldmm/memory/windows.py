"""Event-time window cascade of one user: which windows close when, and what they merge.

Pure logic, no I/O and no Bytewax, with wall time injected (``now``, epoch seconds): the rules
that are easy to get wrong (lateness, idle streams, session ends read ahead of their data,
privacy pauses) are tested with a fake clock. Nothing is dropped silently: a capture that
missed its window is a :class:`LateItem`, one inside a pause a :class:`PausedItem`. The rules
and why: docs/architecture.md ("Time and ``as_of``"); the hierarchy: DESIGN.md §3.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from worldmm.models import SCALES

log = logging.getLogger("worldmm.memory.windows")

Kind = Literal["frames", "audio"]
KINDS: tuple[Kind, ...] = ("frames", "audio")

BASE_S, THREE_MIN_S, TEN_MIN_S, HOUR_S = SCALES
_MS = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

WindowId = tuple[int, int]
"""(scale seconds, window start in epoch ms)."""


def ms_to_dt(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def dt_to_ms(ts: datetime) -> int:
    if ts.tzinfo is None:
        raise ValueError("naive datetime: event times must be timezone-aware")
    return (ts - _EPOCH) // timedelta(milliseconds=1)


# --- the hierarchy (pure arithmetic) -------------------------------------------------------


def align(ts_ms: int, scale_s: int) -> int:
    """Start (epoch ms) of the ``scale_s`` window holding ``ts_ms``; 3 min is special."""
    if scale_s == THREE_MIN_S:
        ten = align(ts_ms, TEN_MIN_S)
        offset = min((ts_ms - ten) // (THREE_MIN_S * _MS), 2)
        return ten + offset * THREE_MIN_S * _MS
    size = scale_s * _MS
    return ts_ms - ts_ms % size


def window_end(wid: WindowId) -> int:
    scale, start = wid
    return start + scale * _MS


def parent_of(wid: WindowId) -> WindowId | None:
    """The window a finished window feeds into (None for the top scale)."""
    scale, start = wid
    if scale == BASE_S:
        ten = align(start, TEN_MIN_S)
        if start - ten < 3 * THREE_MIN_S * _MS:
            return (THREE_MIN_S, align(start, THREE_MIN_S))
        return (TEN_MIN_S, ten)  # the remaining minute feeds the 10 min window directly
    if scale == THREE_MIN_S:
        return (TEN_MIN_S, align(start, TEN_MIN_S))
    if scale == TEN_MIN_S:
        return (HOUR_S, align(start, HOUR_S))
    if scale == HOUR_S:
        return None
    raise ValueError(f"unknown scale {scale}; expected one of {SCALES}")


def children_of(wid: WindowId) -> list[WindowId]:
    """Every child a full coarse window has (a flushed or gappy one has a subset)."""
    scale, start = wid
    if scale == THREE_MIN_S:
        return [(BASE_S, start + i * BASE_S * _MS) for i in range(6)]
    if scale == TEN_MIN_S:
        threes = [(THREE_MIN_S, start + i * THREE_MIN_S * _MS) for i in range(3)]
        tail = 3 * THREE_MIN_S * _MS
        return threes + [(BASE_S, start + tail + i * BASE_S * _MS) for i in range(2)]
    if scale == HOUR_S:
        return [(TEN_MIN_S, start + i * TEN_MIN_S * _MS) for i in range(6)]
    raise ValueError(f"scale {scale} has no children")


# --- inputs and outputs ------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """A captured frame or audio chunk, already stored; ``ref`` is what the builder needs
    (blob key, metadata). ``key`` identifies it for de-duplication (at-least-once input)."""

    kind: Kind
    key: str
    session_id: str
    ts_ms: int
    end_ms: int  # frames: == ts_ms; audio: start + duration
    ref: Any = None

    def windows(self) -> list[int]:
        """Starts of the base windows this item falls into (audio may span two)."""
        first = align(self.ts_ms, BASE_S)
        last = align(max(self.ts_ms, self.end_ms - 1), BASE_S)
        return list(range(first, last + 1, BASE_S * _MS))


@dataclass(frozen=True)
class SessionEnd:
    """The end of a capture session. ``last_ms`` lists, per stream, where the last capture
    the gateway sent ends: once every listed stream has reached it, the whole session has
    arrived and its windows can close at once, whatever order the topics were read in."""

    session_id: str
    ts_ms: int
    last_ms: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Pause:
    """A privacy pause began (``resume=False``) or ended (``resume=True``) at ``ts_ms``."""

    session_id: str
    ts_ms: int
    resume: bool = False


# The longest span a pause fills with paused windows (longer pauses: their first day).
MAX_PAUSE_FILL_MS = 24 * 3600 * _MS


class _Span:
    """What a window's ``scale_s`` and ``start_ms`` imply (shared by both window kinds)."""

    scale_s: int
    start_ms: int

    @property
    def wid(self) -> WindowId:
        return (self.scale_s, self.start_ms)

    @property
    def end_ms(self) -> int:
        return window_end(self.wid)


@dataclass(frozen=True)
class BaseWindow(_Span):
    user_id: str
    start_ms: int
    items: tuple[Item, ...]
    partial: bool
    session_id: str | None
    paused: bool = False  # nothing captured: the window lay inside a privacy pause

    @property
    def scale_s(self) -> int:
        return BASE_S


@dataclass(frozen=True)
class CoarseWindow(_Span):
    user_id: str
    scale_s: int
    start_ms: int
    children: tuple[WindowId, ...]  # the children that closed, in time order
    partial: bool
    session_id: str | None


@dataclass(frozen=True)
class LateItem:
    user_id: str
    item: Item
    window_start_ms: int
    closed_until_ms: int


@dataclass(frozen=True)
class PausedItem:
    """A capture dropped unstored: it fell inside a privacy pause."""

    user_id: str
    item: Item


WindowEvent = BaseWindow | CoarseWindow | LateItem | PausedItem


@dataclass(frozen=True)
class WindowConfig:
    allowed_lateness_s: float = 10.0
    idle_s: float = 30.0  # a stream silent this long (wall) stops holding the watermark
    # Wall time a session end waits after the user's last input. An end whose streams have
    # not all arrived waits at least ``idle_s``; ``inf`` (bounded runs) leaves it to EOF.
    session_end_grace_s: float = 5.0
    # Input of later sessions held while an end waits for its session (see the module doc);
    # past this many the end applies at once. ~8 min of 1 fps frames and 5 s audio chunks.
    max_held: int = 512
    # Wall time after which a state holding nothing (see ``holds_nothing``) may be dropped.
    state_idle_s: float = 900.0

    @classmethod
    def from_settings(cls, settings: Any) -> WindowConfig:
        return cls(
            allowed_lateness_s=settings.allowed_lateness_s,
            idle_s=getattr(settings, "stream_idle_s", cls.idle_s),
            session_end_grace_s=getattr(settings, "session_end_grace_s", cls.session_end_grace_s),
            state_idle_s=getattr(settings, "user_state_idle_s", cls.state_idle_s),
        )


# --- per-user state ----------------------------------------------------------------------


def _after(item: Item | Pause, end: SessionEnd) -> bool:
    """The input belongs after ``end``'s session: it lies beyond the end, or starts a new
    session at it (one stream's order is the capture order)."""
    return item.ts_ms > end.ts_ms or (item.session_id != end.session_id and item.ts_ms >= end.ts_ms)


def _held_key(x: Item | Pause) -> str:
    """Identity of held input: a redelivered record is held once."""
    if isinstance(x, Item):
        return f"{x.kind}:{x.key}"
    return f"pause:{x.session_id}:{x.ts_ms}:{int(x.resume)}"


@dataclass
class WindowCascade:
    """One user's window cascade: all its window state; picklable (it is the Bytewax snapshot)."""

    user_id: str
    config: WindowConfig = field(default_factory=WindowConfig)
    open_base: dict[int, dict[str, Item]] = field(default_factory=dict)
    closed_children: dict[WindowId, set[WindowId]] = field(default_factory=dict)
    closed_until_ms: int = 0  # every base window ending at or before this is closed
    progress_ms: dict[str, int] = field(default_factory=dict)  # per stream, this session
    last_seen_s: dict[str, float] = field(default_factory=dict)  # wall time per stream
    session_id: str | None = None
    session_first_s: float | None = None  # wall time of the session's first item
    # Session ends not applied yet, oldest first, with the wall time each was received.
    # Several can wait: a consumer catching up reads the small control topic far ahead.
    pending_ends: list[tuple[SessionEnd, float]] = field(default_factory=list)
    last_input_s: float | None = None
    late_count: int = 0
    # Privacy pauses: closed spans [start, end) and the start of the open one, if any.
    pauses: list[tuple[int, int]] = field(default_factory=list)
    paused_since: int | None = None
    paused_windows: set[int] = field(default_factory=set)  # base starts a pause touched
    # Captures from after the open pause's start: the resume (another topic) may be read after
    # captures it lets through, so their fate waits for it (bounded by ``max_held``).
    pause_held: list[Item] = field(default_factory=list)
    # Input after the oldest pending end, held until that end applies (insertion order).
    held: dict[str, Item | Pause] = field(default_factory=dict)
    forced_ends: int = 0  # ends applied early because ``held`` reached its cap

    def copy(self) -> WindowCascade:
        """An independent copy for a snapshot, made per epoch for every user that changed.
        Items, ends and the config are immutable, so only the containers are copied (a deep
        copy of every item was the window step's largest CPU cost)."""
        return WindowCascade(
            user_id=self.user_id,
            config=self.config,
            open_base={start: dict(items) for start, items in self.open_base.items()},
            closed_children={wid: set(c) for wid, c in self.closed_children.items()},
            closed_until_ms=self.closed_until_ms,
            progress_ms=dict(self.progress_ms),
            last_seen_s=dict(self.last_seen_s),
            session_id=self.session_id,
            session_first_s=self.session_first_s,
            pending_ends=list(self.pending_ends),
            last_input_s=self.last_input_s,
            late_count=self.late_count,
            pauses=list(self.pauses),
            paused_since=self.paused_since,
            paused_windows=set(self.paused_windows),
            pause_held=list(self.pause_held),
            held=dict(self.held),
            forced_ends=self.forced_ends,
        )

    # -- idle wearers ------------------------------------------------------------------

    def holds_nothing(self) -> bool:
        """No window open or waiting for its children, no session end, held input or
        pause: dropping the state loses only ``closed_until_ms``, which the store knows
        (the end of the user's last window)."""
        return not (
            self.open_base
            or self.closed_children
            or self.pending_ends
            or self.held
            or self.pause_held
            or self.pauses
            or self.paused_since is not None
        )

    def evict_at(self) -> float | None:
        """Wall time from which the state may be dropped (None: it holds something)."""
        if not self.holds_nothing():
            return None
        return (self.last_input_s or 0.0) + self.config.state_idle_s

    # -- feeding ----------------------------------------------------------------------

    def ingest(self, inputs: Iterable[Item | SessionEnd | Pause], now: float) -> list[WindowEvent]:
        """Take a batch of items/ends, then close what the new watermark allows.

        Closing happens once per batch so items of one batch that came from different topics
        count before any window closes.
        """
        out: list[WindowEvent] = []
        for x in sorted(inputs, key=lambda v: v.ts_ms):
            if isinstance(x, SessionEnd):
                self.last_input_s = now
                self.pending_ends.append((x, now))
                self.pending_ends.sort(key=lambda pair: pair[0].ts_ms)
                continue
            out += self._feed(x, now)
        out += self.tick(now)
        return out

    def _feed(self, x: Item | Pause, now: float) -> list[WindowEvent]:
        """One item or pause: held while it belongs after an end that still waits for its
        session, else applied (first applying every end it shows to be over)."""
        out: list[WindowEvent] = []
        while self.pending_ends and _after(x, end := self.pending_ends[0][0]):
            # A capture shows an end without ``last_ms`` to be over; a control record, read
            # ahead of the captures, never does.
            waits = bool(end.last_ms) or isinstance(x, Pause)
            if waits and not self._caught_up(end) and not self._over_cap(x):
                # Not input of the waiting session: it does not delay the end's grace.
                self.held.setdefault(_held_key(x), x)
                return out
            out += self._apply_end(now)  # the next session has begun
        self.last_input_s = now
        if isinstance(x, Pause):
            return out + (self._resume(x.ts_ms) if x.resume else self._pause(x.ts_ms))
        return out + self._add(x, now)

    def _over_cap(self, x: Item | Pause) -> bool:
        """Holding ``x`` would pass the cap: the oldest end then applies without its
        stragglers (logged and counted; what arrives of them after is late)."""
        if len(self.held) < self.config.max_held or _held_key(x) in self.held:
            return False
        end = self.pending_ends[0][0]
        self.forced_ends += 1
        log.warning(
            "held_input_cap user=%s session=%s held=%d: session end applied before its "
            "streams caught up",
            self.user_id,
            end.session_id,
            len(self.held),
        )
        return True

    def _apply_end(self, now: float) -> list[WindowEvent]:
        """Apply the oldest pending end, then replay the input held behind it in time order
        (some may wait again, behind the next end)."""
        out = self._flush(self.pending_ends[0][0])
        held, self.held = self.held, {}
        for x in sorted(held.values(), key=lambda v: v.ts_ms):
            out += self._feed(x, now)
        return out

    def _add(self, item: Item, now: float) -> list[WindowEvent]:
        if self.session_id != item.session_id or self.session_first_s is None:
            self.session_id = item.session_id
            self.session_first_s = now
        out: list[WindowEvent] = []
        if self.paused_since is not None and item.ts_ms >= self.paused_since:
            # After the open pause's start: kept or dropped once its resume is read. Its
            # progress waits too, so its windows do not close before they can take it.
            self.last_seen_s[item.kind] = now
            self.pause_held.append(item)
            if len(self.pause_held) <= self.config.max_held:
                return []
            return [PausedItem(self.user_id, self.pause_held.pop(0))]  # no resume in time
        if self._in_pause(item):
            # progress still counts: time moves on through a pause, so its windows close
            self.progress_ms[item.kind] = max(self.progress_ms.get(item.kind, 0), item.end_ms)
            self.last_seen_s[item.kind] = now
            for start in item.windows():
                if start >= self.closed_until_ms:
                    self.open_base.setdefault(start, {})
                    self.paused_windows.add(start)
            return [PausedItem(self.user_id, item)]
        for start in item.windows():
            if start < self.closed_until_ms:
                self.late_count += 1
                out.append(LateItem(self.user_id, item, start, self.closed_until_ms))
            else:
                self.open_base.setdefault(start, {})[item.key] = item
        self.progress_ms[item.kind] = max(self.progress_ms.get(item.kind, 0), item.end_ms)
        self.last_seen_s[item.kind] = now
        return out

    # -- privacy pauses ---------------------------------------------------------------

    def _in_pause(self, item: Item) -> bool:
        """Any part of the capture lies inside a pause (an audio chunk that straddles the
        pause's start goes whole: nothing said during a pause is kept)."""
        first, last = item.ts_ms, max(item.ts_ms + 1, item.end_ms)
        if self.paused_since is not None and last > self.paused_since:
            return True
        return any(first < end and last > start for start, end in self.pauses)

    def _pause(self, ts_ms: int) -> list[WindowEvent]:
        if self.paused_since is not None:
            return []  # already paused (a repeated record)
        self.paused_since = ts_ms
        out: list[WindowEvent] = []
        # Captures read before the pause record: one that straddles its start goes; one
        # after it waits for the resume, as if read now (the resume, behind them on the
        # control topic, may end the pause before them: they were dropped before).
        # Their progress is taken back too: a capture held for the resume holds its windows.
        seen: set[str] = set()  # an audio chunk lies in two windows: one event
        for start in sorted(self.open_base):
            items = self.open_base[start]
            for key in [k for k, i in items.items() if self._in_pause(i)]:
                item = items.pop(key)
                if item.ts_ms < ts_ms:
                    self.paused_windows.add(start)
                    if key not in seen:
                        out.append(PausedItem(self.user_id, item))
                elif key not in seen:
                    self.pause_held.append(item)
                    self.progress_ms[item.kind] = min(self.progress_ms[item.kind], ts_ms)
                seen.add(key)
        self.pause_held.sort(key=lambda i: i.ts_ms)
        while len(self.pause_held) > self.config.max_held:
            out.append(PausedItem(self.user_id, self.pause_held.pop(0)))  # as in _add
        return out

    def _resume(self, ts_ms: int) -> list[WindowEvent]:
        if self.paused_since is None or ts_ms < self.paused_since:
            return []  # not paused (a repeated or stray resume)
        start, self.paused_since = self.paused_since, None
        self.pauses.append((start, ts_ms))
        end = min(ts_ms, start + MAX_PAUSE_FILL_MS)
        for base in range(align(start, BASE_S), end, BASE_S * _MS):
            if base >= self.closed_until_ms:
                self.open_base.setdefault(base, {})
                self.paused_windows.add(base)
        # the captures that waited: those inside the span go, those after it are kept
        held, self.pause_held = self.pause_held, []
        out: list[WindowEvent] = []
        for item in sorted(held, key=lambda i: i.ts_ms):
            out += self._add(item, self.last_input_s or 0.0)
        return out

    def _forget_old_pauses(self) -> None:
        """Closed pauses wholly before the closed windows can catch no capture any more."""
        self.pauses = [(s, e) for s, e in self.pauses if e > self.closed_until_ms]

    # -- time -------------------------------------------------------------------------

    def watermark_ms(self, now: float) -> int | None:
        """Event time up to which everything is believed to have arrived (None: unknown)."""
        if not self.progress_ms:
            return None
        lateness = round(self.config.allowed_lateness_s * _MS)
        first = self.session_first_s if self.session_first_s is not None else now
        holding = []
        for kind in KINDS:
            seen = self.last_seen_s.get(kind, first)
            if now - seen < self.config.idle_s:
                holding.append(self.progress_ms.get(kind))
        if holding:
            if any(p is None for p in holding):
                return None  # an expected stream has not shown up yet
            return min(holding) - lateness  # type: ignore[type-var]
        # Every stream idle: event time moves on with wall time.
        latest_s = max(self.last_seen_s.values())
        return max(self.progress_ms.values()) - lateness + round((now - latest_s) * _MS)

    def tick(self, now: float) -> list[WindowEvent]:
        """Close what the watermark allows, and apply a session end whose grace has passed."""
        out: list[WindowEvent] = []
        while self.pending_ends and self._end_due(now):
            out += self._apply_end(now)
        wm = self.watermark_ms(now)
        if wm is not None:
            out += self._close_until(wm)
        return out

    def _caught_up(self, end: SessionEnd) -> bool:
        """Every stream the end lists has arrived up to its last capture, or has moved on
        past it (a capture of it is held behind the end: lost input, else it would be here)."""
        moved_on = {x.kind for x in self.held.values() if isinstance(x, Item)}
        return bool(end.last_ms) and all(
            self.progress_ms.get(kind, -1) >= ms or kind in moved_on for kind, ms in end.last_ms
        )

    def _end_wake(self) -> float:
        """Wall time at which the oldest pending end gives up waiting for its stragglers."""
        end, received = self.pending_ends[0]
        grace = self.config.session_end_grace_s
        if end.last_ms:  # the end says more is on its way: lost input must be the reason
            grace = max(grace, self.config.idle_s)
        return max(received, self.last_input_s or received) + grace

    def _end_due(self, now: float) -> bool:
        return self._caught_up(self.pending_ends[0][0]) or now >= self._end_wake()

    def next_wake(self, now: float) -> float | None:
        """Wall time at which :meth:`tick` could close something without new input."""
        if self.pending_ends and math.isfinite(wake := self._end_wake()):
            return wake
        if not self.open_base:
            return None
        first = self.session_first_s if self.session_first_s is not None else now
        stamps = [self.last_seen_s.get(kind, first) for kind in KINDS]
        # The next change of regime: the earliest still-active stream going idle ...
        active = [s + self.config.idle_s for s in stamps if now - s < self.config.idle_s]
        if active:
            return min(active)
        # ... or, all idle, wall time carrying the watermark past the oldest open window.
        wm = self.watermark_ms(now)
        if wm is None:
            return None
        due = window_end((BASE_S, min(self.open_base)))
        return now + max(due - wm, 0) / _MS

    def eof(self, now: float) -> list[WindowEvent]:
        """The input ended (a bounded replay): apply a pending session end; windows still
        open stay in the state (and the snapshot) for the next run."""
        out: list[WindowEvent] = []
        while self.pending_ends:
            out += self._apply_end(now)
        wm = self.watermark_ms(now)
        if wm is None and self.progress_ms:
            # Streams that never showed up do not hold a finished input back.
            wm = min(self.progress_ms.values()) - round(self.config.allowed_lateness_s * _MS)
        if wm is not None:
            out += self._close_until(wm)
        return out

    # -- closing ----------------------------------------------------------------------

    def _close_until(self, wm: int) -> list[WindowEvent]:
        out: list[WindowEvent] = []
        for start in sorted(s for s in self.open_base if window_end((BASE_S, s)) <= wm):
            out += self._close_base(start, partial=False)
        out += self._close_coarse(lambda wid: window_end(wid) <= wm, end_ms=None)
        return out

    def _close_base(self, start: int, *, partial: bool) -> list[WindowEvent]:
        items = self.open_base.pop(start)
        ordered = tuple(sorted(items.values(), key=lambda i: (i.ts_ms, i.kind, i.key)))
        session = ordered[-1].session_id if ordered else self.session_id
        wid: WindowId = (BASE_S, start)
        self.closed_until_ms = max(self.closed_until_ms, window_end(wid))
        paused = start in self.paused_windows and not ordered
        self.paused_windows.discard(start)
        self._forget_old_pauses()
        parent = parent_of(wid)
        if parent is not None:
            self.closed_children.setdefault(parent, set()).add(wid)
        return [BaseWindow(self.user_id, start, ordered, partial, session, paused)]

    def _close_coarse(self, due: Any, *, end_ms: int | None) -> list[WindowEvent]:
        """Close due coarse windows finest first, so a parent sees its children closed."""
        out: list[WindowEvent] = []
        for scale in SCALES[1:]:
            for wid in sorted(w for w in self.closed_children if w[0] == scale and due(w)):
                children = tuple(sorted(self.closed_children.pop(wid), key=lambda c: c[1]))
                partial = end_ms is not None and end_ms < window_end(wid)
                out.append(
                    CoarseWindow(self.user_id, scale, wid[1], children, partial, self.session_id)
                )
                parent = parent_of(wid)
                if parent is not None:
                    self.closed_children.setdefault(parent, set()).add(wid)
        return out

    def _flush(self, end: SessionEnd) -> list[WindowEvent]:
        """Session end: close every open window; those ending after ``end`` are partial. A
        pause with no resume ends with the session."""
        out: list[WindowEvent] = self._resume(end.ts_ms)
        for start in sorted(self.open_base):
            out += self._close_base(start, partial=end.ts_ms < window_end((BASE_S, start)))
        out += self._close_coarse(lambda wid: True, end_ms=end.ts_ms)
        # Event time never runs backwards: windows before the end are closed for good.
        self.closed_until_ms = max(self.closed_until_ms, align(end.ts_ms, BASE_S))
        self.pending_ends = [p for p in self.pending_ends if p[0] is not end]
        self.progress_ms.clear()
        self.last_seen_s.clear()
        self.session_first_s = None
        return out
