"""A window with nothing new takes the caption of the window before it, with no model call.

"Nothing new": no speech, and every sampled frame within ``still_window_change`` of the view
the earlier caption describes. Only a caption made from one view and no speech is carried (a
caption that quotes what was said, or tells a walk, would be wrong for a quiet, still
window), and a carried caption keeps the view it was made from, so a slow drift never
stretches it further than the threshold. The carrying window writes no entities or triples
of its own: the window it carries from holds them.

Each wearer's latest windows are remembered in this process. One wearer's windows close in
order and begin building in that order, so the window before is found whenever this process
builds it; after a restart, or for a window rebuilt alone, there is none, and the window is
captioned as usual.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from worldmm.memory.keyframes import Look, change
from worldmm.memory.windows import BASE_S, BaseWindow

if TYPE_CHECKING:
    from worldmm.memory.window_outcome import Window

MAX_WEARERS = 10_000  # wearers remembered per process (least recently seen go first)
WINDOW_MS = BASE_S * 1000


@dataclass(frozen=True)
class Carry:
    """A caption another window may take: what it says, the view it describes, the
    segment's search vector, and the window it was made for."""

    caption: Any  # str, or a Scored str (the model's importance goes with it)
    view: Look
    search_embedding: np.ndarray | None
    made_for_ms: int


class Slot:
    """One window's entry: settled with its :class:`Carry`, or None when it has none to
    give. Bound to the event loop that builds the window."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Carry | None] = self.loop.create_future()

    @property
    def settled(self) -> bool:
        return self.future.done()

    def settle(self, carry: Carry | None) -> None:
        if not self.future.done():
            self.future.set_result(carry)

    async def carry(self) -> Carry | None:
        """What the window gives, once it knows (None from another event loop)."""
        if self.loop is not asyncio.get_running_loop():
            return None
        return await self.future


class RecentWindows:
    """Each wearer's windows in flight in this process, and the latest built, by start."""

    def __init__(self) -> None:
        self._slots: OrderedDict[str, dict[int, Slot]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def building(self, window: Window) -> Iterator[None]:
        """While ``window`` is processed: its slot is there from the start (windows start in
        the order they close, so the one before is found when it is being built), and
        settled with nothing at the end unless its build gave a caption to carry."""
        if not isinstance(window, BaseWindow):
            yield
            return
        slot = self._slot(window.user_id, window.start_ms, fresh=True)
        try:
            yield
        finally:
            slot.settle(None)

    def begin(self, user_id: str, start_ms: int) -> tuple[Slot, Slot | None]:
        """The slot of the window at ``start_ms`` (the one :meth:`building` made, or a new
        one when that was settled) and the slot of the window just before it, if any."""
        slot = self._slot(user_id, start_ms, fresh=False)
        with self._lock:
            before = self._slots.get(user_id, {}).get(start_ms - WINDOW_MS)
        return slot, before

    def _slot(self, user_id: str, start_ms: int, *, fresh: bool) -> Slot:
        with self._lock:
            slots = self._slots.pop(user_id, {})
            slot = slots.get(start_ms)
            if fresh or slot is None or slot.settled:
                slot = slots[start_ms] = Slot()
            self._slots[user_id] = _needed(slots)
            while len(self._slots) > MAX_WEARERS:
                self._slots.popitem(last=False)
            return slot


def _needed(slots: dict[int, Slot]) -> dict[int, Slot]:
    """The slots someone may still read: those in flight, the newest, and those whose next
    window is in flight (it reads them when its build begins)."""
    newest = max(slots, default=None)
    return {
        t: s
        for t, s in slots.items()
        if not s.settled
        or t == newest
        or (t + WINDOW_MS in slots and not slots[t + WINDOW_MS].settled)
    }


def still_since(carry: Carry, looks: Sequence[Look], threshold: float) -> bool:
    """Whether every frame stays within ``threshold`` of the view ``carry`` describes."""
    return bool(looks) and all(change(carry.view, lk) < threshold for lk in looks)
