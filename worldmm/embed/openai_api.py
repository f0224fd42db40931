"""OpenAI (or OpenAI-compatible) embeddings: batched requests with the ``dimensions`` parameter,
each retried by the model policy (worldmm.providers.calls)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from worldmm import metrics
from worldmm.embed.base import EmbeddingDimensionError, l2_normalise
from worldmm.providers.calls import call_model_sync
from worldmm.providers.errors import ModelCallError
from worldmm.retry import RetryPolicy


@dataclass(eq=False)
class OpenAIEmbedder:
    """Synchronous client (embedders are called from worker threads and sync code)."""

    client: Any  # openai.OpenAI, built with max_retries=0
    model: str
    dim: int
    retry: RetryPolicy
    provider: str  # the retries' metric label
    batch_size: int = 256
    send_dimensions: bool = True

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def embed(self, texts: list[str]) -> np.ndarray:
        import openai

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[float]] = []
        started = time.perf_counter()
        for i in range(0, len(texts), self.batch_size):
            chunk = [t if t.strip() else " " for t in texts[i : i + self.batch_size]]
            extra = {"dimensions": self.dim} if self.send_dimensions else {}
            try:
                reply = call_model_sync(
                    partial(self.client.embeddings.create, model=self.model, input=chunk, **extra),
                    self.retry,
                    role="embed",
                    provider=self.provider,
                )
            except openai.OpenAIError as exc:
                metrics.EMBED_ERRORS.labels(backend="openai").inc()
                raise ModelCallError(f"embedding call failed: {exc}", role="embed") from exc
            ordered = sorted(reply.data, key=lambda d: d.index)
            rows.extend(d.embedding for d in ordered)
        matrix = np.asarray(rows, dtype=np.float32)
        if matrix.shape != (len(texts), self.dim):
            raise EmbeddingDimensionError(
                f"{self.name} returned shape {matrix.shape}, expected ({len(texts)}, {self.dim}); "
                "check WORLDMM_TEXT_EMBED_DIM and WORLDMM_EMBED_MODEL"
            )
        metrics.EMBED_LATENCY.labels(backend="openai").observe(time.perf_counter() - started)
        metrics.EMBED_TEXTS.labels(backend="openai").inc(len(texts))
        return l2_normalise(matrix)
