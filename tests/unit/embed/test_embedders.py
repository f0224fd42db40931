from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import REGISTRY

from fakes.openai_server import Reply
from worldmm.embed import EmbeddingDimensionError, build_embedder, check_dimension
from worldmm.embed.openai_api import OpenAIEmbedder
from worldmm.providers.errors import ModelCallError
from worldmm.settings import load_settings


@pytest.fixture(scope="module")
def built_minilm():
    """MiniLM as the factory builds it from settings (the shared ``minilm`` is built directly)."""
    return build_embedder(load_settings(embed_backend="local", text_embed_dim=384))


def test_minilm_is_384_d_normalised_and_semantic(built_minilm):
    vectors = built_minilm.embed(
        ["I bought milk at the shop", "I purchased milk in a store", "Rain"]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
    assert built_minilm.embed([]).shape == (0, 384)
    assert built_minilm.name == "local:all-MiniLM-L6-v2"


def test_minilm_is_cached_per_process(built_minilm):
    from worldmm.embed.local import MiniLMEmbedder

    assert MiniLMEmbedder()._model is built_minilm._model


def test_dimension_mismatch_stops_start_up(built_minilm):
    with pytest.raises(EmbeddingDimensionError, match="WORLDMM_TEXT_EMBED_DIM=384"):
        build_embedder(load_settings(embed_backend="local", text_embed_dim=1536))
    check_dimension(built_minilm, 384)


def openai_settings(fake, dim: int, **extra):
    return load_settings(
        embed_backend="openai",
        llm_provider="compatible",
        llm_base_url=fake.base_url,
        embed_model="text-embedding-3-small",
        text_embed_dim=dim,
        **extra,
    )


def test_openai_embeddings_batched_with_dimensions(fake_openai):
    embedder = build_embedder(openai_settings(fake_openai, 64))
    assert isinstance(embedder, OpenAIEmbedder)
    embedder.batch_size = 2
    vectors = embedder.embed(["a", "b", "c", ""])
    assert vectors.shape == (4, 64)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    bodies = [r.body for r in fake_openai.requests if r.path == "/v1/embeddings"]
    assert [b["input"] for b in bodies] == [["a", "b"], ["c", " "]]
    assert all(b["dimensions"] == 64 and b["model"] == "text-embedding-3-small" for b in bodies)
    again = embedder.embed(["a"])
    assert np.allclose(again[0], vectors[0])


def test_openai_wrong_dimension_is_a_clear_error(fake_openai):
    fake_openai.embeddings.push(
        Reply(
            body={
                "object": "list",
                "model": "m",
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
                "data": [{"object": "embedding", "index": 0, "embedding": [0.1] * 12}],
            }
        )
    )
    embedder = build_embedder(openai_settings(fake_openai, 64))
    with pytest.raises(EmbeddingDimensionError, match="expected \\(1, 64\\)"):
        embedder.embed(["a"])


def _retries(reason: str) -> float:
    labels = {"role": "embed", "provider": "compatible", "reason": reason}
    return REGISTRY.get_sample_value("worldmm_llm_retries_total", labels) or 0.0


def test_a_429_then_200_is_retried_by_our_policy_and_counted(fake_openai):
    before = _retries("rate_limit")
    fake_openai.embeddings.push(Reply.error(429, "slow down", **{"retry-after": "0"}))
    embedder = build_embedder(openai_settings(fake_openai, 64, llm_max_retries=1))
    assert embedder.embed(["a"]).shape == (1, 64)
    assert [r.path for r in fake_openai.requests] == ["/v1/embeddings"] * 2
    assert _retries("rate_limit") == before + 1


def test_the_sdk_does_not_retry_embeddings_on_its_own(fake_openai):
    fake_openai.embeddings.push(Reply.error(429, "slow down", **{"retry-after": "0"}))
    embedder = build_embedder(openai_settings(fake_openai, 64, llm_max_retries=0))
    assert embedder.client.max_retries == 0
    with pytest.raises(ModelCallError, match="slow down"):
        embedder.embed(["a"])
    assert len(fake_openai.requests) == 1  # our policy said no retry, and the SDK made none
