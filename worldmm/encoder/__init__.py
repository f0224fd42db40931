"""Visual encoder: clips and query texts into one embedding space (VLM2Vec on the GPU worker,
or the offline CPU algorithm in-process)."""

from worldmm.breaker import BreakerState, CircuitBreaker
from worldmm.encoder.base import EncoderError, EncoderRejected, EncoderUnavailable, VisualEncoder
from worldmm.encoder.client import HttpVisualEncoder
from worldmm.encoder.factory import build_visual_encoder
from worldmm.encoder.frames import InvalidInput
from worldmm.encoder.offline import InProcessOfflineEncoder, OfflineVisualEmbedder

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "EncoderError",
    "EncoderRejected",
    "EncoderUnavailable",
    "HttpVisualEncoder",
    "InProcessOfflineEncoder",
    "InvalidInput",
    "OfflineVisualEmbedder",
    "VisualEncoder",
    "build_visual_encoder",
]
