from __future__ import annotations

import pytest

from gpu_worker.backends.vlm2vec import Vlm2VecBackend
from tests.fixtures.random_model import save_random_model


@pytest.fixture(scope="session")
def tiny_backend(tmp_path_factory):
    """The VLM2Vec backend over a tiny random Qwen2-VL saved to disk (no download)."""
    directory = save_random_model("tiny", tmp_path_factory.mktemp("tiny-qwen2vl-int"))
    return Vlm2VecBackend.load(directory, device="cpu")
