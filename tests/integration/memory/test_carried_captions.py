"""Windows with nothing new cost nothing new: a still, silent window takes the caption of the
window before it with no model call, marked in its segment and found by search; a window
that moved, or spoke, is captioned (real store, scripted roles)."""

from __future__ import annotations

import asyncio
import io
import wave
from datetime import timedelta

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests.fixtures.construction_fakes import Embedder, Encoder, Roles
from tests.fixtures.windows import T10, segment_at
from worldmm.memory.retrieval.episodic import search_episodic
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, Item, dt_to_ms

pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles=Roles, embedder=Embedder, encoder=Encoder),
]


class CountingRoles(Roles):
    """The scripted roles, with what each caption call was given."""

    def __init__(self) -> None:
        super().__init__()
        self.captions: list[tuple[int, str, list[str] | None]] = []

    async def caption(self, frames, transcript, seen_text=None):
        self.captions.append((len(frames), transcript, seen_text))
        return await super().caption(frames, transcript, seen_text)


class Transcriber:
    name = "scripted"

    def transcribe(self, audio: bytes, *, content_type: str, sample_rate: int) -> str:
        return "Lucia: the keys are in the bowl."


def view(colour: tuple[int, int, int], seed: int) -> bytes:
    """A 640x360 frame of one room (a wall, a box), a few pixels of jitter per seed."""
    img = Image.new("RGB", (660, 380), colour)
    ImageDraw.Draw(img).rectangle([200, 120, 420, 300], fill=(250, 250, 250))
    dx, dy = seed % 7, seed % 5
    buf = io.BytesIO()
    img.crop((dx, dy, dx + 640, dy + 360)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def wav(seconds: int = 5, rate: int = 16_000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
        w.writeframes(np.zeros(seconds * rate, dtype="<i2").tobytes())
    return buf.getvalue()


def window(deps, user_id, k: int, colour=(40, 90, 160), speech: bool = False) -> BaseWindow:
    """The ``k``-th 30 s window from T10: a frame every 2 s of one view, audio if ``speech``."""
    start = T10 + timedelta(seconds=30 * k)
    items = []
    for i in range(15):
        ts = dt_to_ms(start) + i * 2000
        key = f"frames/{user_id}/s1/{ts}-{i}.jpg"
        deps.blobs.put(key, view(colour, i))
        items.append(Item("frames", key, "s1", ts, ts, CaptureRef(key, seq=i)))
    if speech:
        ts = dt_to_ms(start)
        key = f"audio/{user_id}/s1/{ts}.wav"
        deps.blobs.put(key, wav())
        ref = CaptureRef(key, sample_rate=16_000, duration_ms=5000, content_type="audio/wav")
        items.append(Item("audio", key, "s1", ts, ts + 5000, ref))
    return BaseWindow(user_id, dt_to_ms(start), tuple(items), False, "s1")


def build(deps, windows: list[BaseWindow]) -> list:
    """The windows built at once on one loop, as the flow does (each waits for the one before
    it only when it may carry its caption)."""

    async def all_of() -> list:
        return list(await asyncio.gather(*(process_window(deps, w) for w in windows)))

    return asyncio.run(all_of())


def test_a_still_silent_window_takes_the_caption_before_it(deps, user_id) -> None:
    from worldmm.store.triples import triples_for_segments

    deps.roles = roles = CountingRoles()
    outs = build(deps, [window(deps, user_id, k) for k in range(3)])
    assert [o.counts["carried"] for o in outs] == [0, 1, 1]
    assert len(roles.captions) == 1  # one vision call for the three windows
    ((frames, _said, _seen),) = roles.captions
    assert frames == 1  # a still window: one keyframe
    first, *rest = (
        segment_at(deps, user_id, 30, T10 + timedelta(seconds=30 * k)) for k in range(3)
    )
    for seg in rest:
        assert seg.caption == first.caption
        assert seg.model_versions["carried"] == T10.isoformat()  # marked, naming its source
        assert seg.processing_status == "complete" and seg.visual_status == "complete"
    with deps.db.connection() as conn:
        assert triples_for_segments(conn, user_id, [first.id])  # the source holds the facts
        assert not triples_for_segments(conn, user_id, [s.id for s in rest])
    # the answer path finds the carried windows too (their search text and vector)
    found = asyncio.run(search_episodic(deps, user_id, "Katrina red mug"))
    assert {h.segment_id for h in found.hits} >= {s.id for s in rest}


def test_a_moved_or_speaking_window_is_captioned(deps, user_id) -> None:
    deps.roles = roles = CountingRoles()
    deps.transcriber = Transcriber()
    windows = [
        window(deps, user_id, 0),
        window(deps, user_id, 1, colour=(200, 60, 30)),  # the view changed
        window(deps, user_id, 2, colour=(200, 60, 30), speech=True),  # someone spoke
        window(deps, user_id, 3, colour=(200, 60, 30)),  # still, but after speech
        window(deps, user_id, 4, colour=(200, 60, 30)),  # still and silent: carried
    ]
    outs = build(deps, windows)
    assert [o.counts["carried"] for o in outs] == [0, 0, 0, 0, 1]
    said = [transcript for _n, transcript, _seen in roles.captions]  # in any order
    assert len(said) == 4 and sum(t.startswith("Lucia") for t in said) == 1


def test_carrying_off_captions_every_window(deps, user_id) -> None:
    deps.roles = roles = CountingRoles()
    deps = deps.with_settings(still_window_change=0.0)
    outs = build(deps, [window(deps, user_id, k) for k in range(3)])
    assert [o.counts["carried"] for o in outs] == [0, 0, 0] and len(roles.captions) == 3


def test_a_window_built_after_a_restart_carries_as_a_clean_run_does(deps, user_id) -> None:
    """The window before was built by another process (this one remembers nothing of it):
    what is carried comes from its stored segment, so the result is the clean run's."""
    from worldmm.memory.carried_captions import RecentWindows

    deps.roles = roles = CountingRoles()
    build(deps, [window(deps, user_id, 0)])
    deps.recent_windows = RecentWindows()  # a fresh process
    (out,) = build(deps, [window(deps, user_id, 1)])
    assert out.counts["carried"] == 1 and len(roles.captions) == 1
    seg = segment_at(deps, user_id, 30, T10 + timedelta(seconds=30))
    assert seg.model_versions["carried"] == T10.isoformat()
    # and a moved view after the restart is captioned
    deps.recent_windows = RecentWindows()
    (moved,) = build(deps, [window(deps, user_id, 2, colour=(200, 60, 30))])
    assert moved.counts["carried"] == 0 and len(roles.captions) == 2
