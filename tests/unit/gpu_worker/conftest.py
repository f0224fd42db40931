from __future__ import annotations

import pytest

from gpu_worker.backends.vlm2vec import Vlm2VecBackend
from tests.fixtures.random_model import save_random_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A randomly initialised tiny Qwen2-VL checkpoint + tokenizer saved to disk (no download)."""
    return save_random_model("tiny", tmp_path_factory.mktemp("tiny-qwen2vl"))


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_dir):
    return Vlm2VecBackend.load(tiny_model_dir, device="cpu")
