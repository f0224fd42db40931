"""A window with nothing new takes the caption of the window before it, with no model call.

"Nothing new": no speech, and every sampled frame within ``still_window_change`` of the view
the earlier caption describes. Only a caption made from one view and no speech is carried (a
caption that quotes what was said, or tells a walk, would be wrong for a quiet, still
window): such a segment stores the view it was made from (``model_versions["view"]``), and a
carried one keeps its source's view and names its source (``model_versions["carried"]``), so
a slow drift never stretches a caption further than the threshold. The carrying window writes
no entities or triples of its own: the window it carries from holds them.

What is carried is read from the stored segment of the window before, so a run killed and
resumed, a replay or a rebuilt window decides as a clean run does. When the window before is
being built in this process, the window waits for it first (one wearer's windows begin in
the order they close: :meth:`RecentWindows.building`).
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from worldmm.memory.keyframes import Look, change
from worldmm.memory.windows import BASE_S, BaseWindow, ms_to_dt

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.memory.window_outcome import Window
    from worldmm.store.models import SegmentRow

MAX_WEARERS = 10_000  # wearers remembered per process (least recently seen go first)
WINDOW_MS = BASE_S * 1000
VIEW, CARRIED = "view", "carried"  # keys of a segment's model_versions


@dataclass(frozen=True)
class Carry:
    """A caption a window takes: what it says (a Scored str when the model rated it), the
    view it describes, and the window it was made for (ISO time)."""

    caption: Any
    view: Look
    made_for: str


def encode_view(view: Look) -> str:
    """A look as stored with a segment: the hash in hex, the histogram's shares in 16 bits."""
    shares = np.round(view.histogram * 65535).astype("<u2").tobytes()
    return f"{view.dhash:016x}:{base64.b64encode(shares).decode('ascii')}"


def decode_view(text: str) -> Look:
    dhash, _, shares = text.partition(":")
    hist = np.frombuffer(base64.b64decode(shares), dtype="<u2").astype(np.float32) / 65535
    return Look(hist, int(dhash, 16))


def as_stored(view: Look) -> Look:
    """``view`` as a later window reads it back (every comparison uses this precision)."""
    return decode_view(encode_view(view))


def still_since(view: Look, looks: Sequence[Look], threshold: float) -> bool:
    """Whether every frame stays within ``threshold`` of ``view``."""
    return bool(looks) and all(change(view, lk) < threshold for lk in looks)


def carry_of(seg: SegmentRow | None) -> Carry | None:
    """What a stored 30 s segment lets the next window take, if anything."""
    models = seg.model_versions if seg is not None else {}
    if seg is None or seg.processing_status != "complete" or VIEW not in models:
        return None
    if not seg.caption or (seg.transcript or "").strip():
        return None
    from worldmm.llm.schemas import Scored

    caption: Any = seg.caption
    if seg.importance_source == "model" and seg.importance is not None:
        caption = Scored(seg.caption, seg.importance)
    made_for = models.get(CARRIED) or seg.window_start.isoformat()
    return Carry(caption, decode_view(models[VIEW]), made_for)


class Slot:
    """One window being built in this process: done when its build has ended."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = self.loop.create_future()

    @property
    def settled(self) -> bool:
        return self.future.done()

    def settle(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    async def wait(self) -> None:
        """Until the window's build ended (at once from another event loop)."""
        if self.loop is asyncio.get_running_loop():
            await self.future


class RecentWindows:
    """Each wearer's windows in flight in this process, and the latest built, by start."""

    def __init__(self) -> None:
        self._slots: OrderedDict[str, dict[int, Slot]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def building(self, window: Window) -> Iterator[None]:
        """While ``window`` is processed: its slot is there from the start, before anything
        is awaited, and done at the end, whatever the end."""
        if not isinstance(window, BaseWindow):
            yield
            return
        slot = self._slot(window.user_id, window.start_ms, fresh=True)
        try:
            yield
        finally:
            slot.settle()

    def begin(self, user_id: str, start_ms: int) -> tuple[Slot, Slot | None]:
        """The slot of the window at ``start_ms`` (the one :meth:`building` made, or a new
        one) and the slot of the window just before it, if this process is building it."""
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
    """The slots someone may still wait on: those in flight, and the newest."""
    newest = max(slots, default=None)
    return {t: s for t, s in slots.items() if not s.settled or t == newest}


async def carried_caption(
    deps: Deps, window: BaseWindow, before: Slot | None, looks: Sequence[Look], transcript: str
) -> Carry | None:
    """The caption the window before gives this one, when this one has nothing new."""
    threshold = deps.settings.still_window_change
    if threshold <= 0 or transcript.strip() or not looks:
        return None
    if before is not None:
        await before.wait()
    from worldmm.store.segments import get_segment_by_window

    def read() -> SegmentRow | None:
        with deps.db.connection() as conn:
            start = ms_to_dt(window.start_ms - WINDOW_MS)
            return get_segment_by_window(conn, window.user_id, BASE_S, start)

    carry = carry_of(await asyncio.to_thread(read))
    if carry is None or not still_since(carry.view, looks, threshold):
        return None
    return carry
