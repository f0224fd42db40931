"""A 30 s window's caption under its user's daily token budget.

Within budget the caption role sees the window's keyframes and the text read in them (the
vision call, most of a window's tokens: worldmm.memory.caption_frames). Past it the window is
captioned locally, from its transcript and that text (the offline captioner, no model call),
and the segment records why (``model_versions["degraded"]``): memory keeps growing, only less
richly, instead of failing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from worldmm import metrics
from worldmm.memory.caption_frames import FramePlan, caption_images, seen_text

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.caption_budget")

DAILY_TOKEN_BUDGET = "daily_token_budget"


async def caption_window(
    deps: Deps, user_id: str, frames: Sequence[bytes], plan: FramePlan, transcript: str
) -> tuple[str, str | None]:
    """(caption, why it was degraded or None) of the window whose sampled frames are
    ``frames``."""
    settings = deps.settings
    images = await asyncio.to_thread(caption_images, frames, plan, settings)
    seen = await asyncio.to_thread(seen_text, frames, plan, settings)
    if not await asyncio.to_thread(deps.usage.over_budget, user_id):
        return await deps.roles.caption(images, transcript, seen_text=seen), None
    from worldmm.llm.rule_based import describe_scene
    from worldmm.llm.rule_based.vision import scene_cues

    cues = await asyncio.to_thread(scene_cues, images, ocr_frames=settings.ocr_frames, texts=seen)
    metrics.WINDOWS_DEGRADED.labels(DAILY_TOKEN_BUDGET).inc()
    log.info(
        "caption_degraded user=%s reason=%s budget=%d",
        user_id,
        DAILY_TOKEN_BUDGET,
        deps.usage.daily_budget,
    )
    return describe_scene(cues, transcript), DAILY_TOKEN_BUDGET
