"""The real VLM2Vec code path on a tiny random Qwen2-VL saved to a temp dir."""

import numpy as np
import pytest

from gpu_worker.backends import load_backend
from gpu_worker.backends.vlm2vec import ModelNotFound
from tests.fixtures.images import noise, solid


def _clips():
    return [
        [noise(i) for i in range(16)],
        [noise(100 + i, size=(120, 80)) for i in range(3)],
        [solid((200, 30, 30))] * 8,
    ]


def test_missing_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotFound, match="config.json"):
        load_backend("vlm2vec", dim=1536, model_dir=tmp_path / "nothing-here")
    with pytest.raises(ModelNotFound, match="--model-dir"):
        load_backend("vlm2vec", dim=1536, model_dir=None)


def test_shapes_and_unit_norms(tiny_backend):
    videos = tiny_backend.encode_videos(_clips())
    texts = tiny_backend.encode_texts(["a red car", "where did i leave my phone"])
    assert videos.shape == (3, tiny_backend.dim)
    assert texts.shape == (2, tiny_backend.dim)
    assert tiny_backend.dim == 64  # the tiny config's hidden size: last-token pooled state
    np.testing.assert_allclose(np.linalg.norm(videos, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-5)
    assert videos.dtype == texts.dtype == np.float32


def test_batched_equals_one_by_one(tiny_backend):
    clips = _clips()
    batched = tiny_backend.encode_videos(clips)
    single = np.stack([tiny_backend.encode_videos([c])[0] for c in clips])
    np.testing.assert_allclose(batched, single, atol=1e-5)

    texts = ["cat", "find the blue door in the kitchen near the window", "red bus"]
    batched = tiny_backend.encode_texts(texts)
    single = np.stack([tiny_backend.encode_texts([t])[0] for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_embeddings_depend_on_content(tiny_backend):
    a, b, a_again = tiny_backend.encode_videos([[noise(1)] * 4, [noise(2)] * 4, [noise(1)] * 4])
    np.testing.assert_allclose(a, a_again, atol=1e-6)
    assert not np.allclose(a, b, atol=1e-3)
    cat, dog = tiny_backend.encode_texts(["cat", "dog"])
    assert not np.allclose(cat, dog, atol=1e-3)
