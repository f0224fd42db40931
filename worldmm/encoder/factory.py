"""Pick the visual encoder from settings: the GPU worker over HTTP, or offline in-process."""

from __future__ import annotations

from worldmm.breaker import encoder_breaker
from worldmm.encoder.base import VisualEncoder
from worldmm.encoder.client import HttpVisualEncoder
from worldmm.encoder.offline import InProcessOfflineEncoder
from worldmm.retry import encoder_policy
from worldmm.settings import Settings


def build_visual_encoder(settings: Settings) -> VisualEncoder:
    """HTTP when ``gpu_worker_url`` is set, otherwise the in-process offline encoder."""
    if settings.gpu_worker_url:
        return HttpVisualEncoder(
            settings.gpu_worker_url,
            settings.visual_embed_dim,
            timeout_s=settings.gpu_timeout_s,
            retry=encoder_policy(settings),
            breaker=encoder_breaker(settings),
        )
    return InProcessOfflineEncoder(settings.visual_embed_dim, ocr_frames=settings.ocr_frames)
