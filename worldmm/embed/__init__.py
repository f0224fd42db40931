"""Text embedders: local MiniLM (offline default) or the OpenAI embeddings API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldmm.embed.base import (
    EmbeddingDimensionError,
    TextEmbedder,
    check_dimension,
    l2_normalise,
)

if TYPE_CHECKING:
    from worldmm.settings import Settings

__all__ = [
    "EmbeddingDimensionError",
    "TextEmbedder",
    "build_embedder",
    "check_dimension",
    "l2_normalise",
]


def build_embedder(settings: Settings) -> TextEmbedder:
    """The configured embedder; its dimension is checked against ``text_embed_dim`` here
    (local) or on every reply (API), so a mismatch stops start-up with a clear message."""
    if settings.embed_backend == "local":
        from worldmm.embed.local import MiniLMEmbedder

        embedder: TextEmbedder = MiniLMEmbedder()
    else:
        from worldmm.embed.openai_api import OpenAIEmbedder
        from worldmm.providers.clients import provider_label, sync_openai_client
        from worldmm.retry import model_policy

        embedder = OpenAIEmbedder(
            sync_openai_client(settings),
            settings.embed_model,
            settings.text_embed_dim,
            retry=model_policy(settings),
            provider=provider_label(settings),
        )
    check_dimension(embedder, settings.text_embed_dim)
    return embedder
