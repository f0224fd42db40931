from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def minilm():
    """The real local embedder, loaded once per test session."""
    from worldmm.embed.local import MiniLMEmbedder

    return MiniLMEmbedder()


from tests.fixtures.fake_openai import fake_openai  # noqa: E402,F401
