"""A 30 s window's caption under its user's daily token budget.

Within budget the caption role sees the frames (the vision call, most of a window's tokens).
Past it the window is captioned locally, from its transcript and the text OCR reads in a few
frames (the offline captioner, no model call), and the segment records why
(``model_versions["degraded"]``): memory keeps growing, only less richly, instead of failing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from worldmm import metrics

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.caption_budget")

DAILY_TOKEN_BUDGET = "daily_token_budget"


async def caption_window(
    deps: Deps, user_id: str, frames: Sequence[bytes], transcript: str
) -> tuple[str, str | None]:
    """(caption, why it was degraded or None)."""
    if not await asyncio.to_thread(deps.usage.over_budget, user_id):
        return await deps.roles.caption(frames, transcript), None
    from worldmm.llm.rule_based import describe_scene
    from worldmm.llm.rule_based.vision import scene_cues

    cues = await asyncio.to_thread(scene_cues, list(frames), ocr_frames=deps.settings.ocr_frames)
    metrics.WINDOWS_DEGRADED.labels(DAILY_TOKEN_BUDGET).inc()
    log.info(
        "caption_degraded user=%s reason=%s budget=%d",
        user_id,
        DAILY_TOKEN_BUDGET,
        deps.usage.daily_budget,
    )
    return describe_scene(cues, transcript), DAILY_TOKEN_BUDGET
