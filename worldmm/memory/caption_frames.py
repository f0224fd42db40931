"""What one caption call is given: the window's keyframes within the image budget, and the
text OCR reads in them at full size.

The visual encoder still gets every sampled frame; the caption call gets at most
``caption_frames`` of them (keyframes by visual change, or evenly spaced), shrunk to
``caption_frame_side``. Shrinking loses small print, so the text is read before, at full
size, and handed over as text (``caption_ocr``). Settings at 16 / uniform / 0 / off give the
call the sampled frames as captured, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worldmm.memory.keyframes import Look, choose_keyframes, look, shrink, stretches, uniform

if TYPE_CHECKING:
    from worldmm.settings import Settings


@dataclass(frozen=True)
class FramePlan:
    """The window's sampled frames seen coarsely: ``looks`` of each (None when nothing
    needs them: evenly spaced frames and no carrying), and the ``keyframes`` the caption
    call sends (indices into the sampled frames)."""

    looks: list[Look] | None
    keyframes: list[int]
    one_view: Look | None  # the look of a window that shows one view throughout, else None


def plan_frames(jpegs: Sequence[bytes], settings: Settings) -> FramePlan:
    """Which of ``jpegs`` (the window's sampled frames, in time order) the caption sees."""
    by_change = settings.caption_frame_choice == "change"
    looks = None
    if jpegs and (by_change or settings.still_window_change > 0):
        looks = [look(j) for j in jpegs]
    if by_change and looks:
        keys = choose_keyframes(looks, settings.caption_frames, settings.keyframe_change)
    else:
        keys = uniform(len(jpegs), settings.caption_frames)
    one_view = None
    if looks and len(stretches(looks, settings.keyframe_change)[0]) == 1:
        one_view = looks[(len(looks) - 1) // 2]
    return FramePlan(looks, keys, one_view)


def caption_images(jpegs: Sequence[bytes], plan: FramePlan, settings: Settings) -> list[bytes]:
    """The keyframes as the caption call sends them (longest side within the budget)."""
    return [shrink(jpegs[i], settings.caption_frame_side) for i in plan.keyframes]


def seen_text(jpegs: Sequence[bytes], plan: FramePlan, settings: Settings) -> list[str] | None:
    """The text OCR reads in the keyframes at full size (``ocr_frames`` of them at most,
    evenly spread); None when ``caption_ocr`` is off (a local captioner then reads the
    frames it is given itself)."""
    if not settings.caption_ocr:
        return None
    from worldmm.llm.rule_based.vision import read_text

    return read_text([jpegs[i] for i in plan.keyframes], settings.ocr_frames)
