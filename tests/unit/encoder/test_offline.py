"""The offline algorithm: text visible in frames and colour words find the clip."""

import asyncio

import numpy as np
import pytest

from tests.fixtures.images import sign, solid, to_jpeg
from tests.fixtures.offline_encoder import clip_text
from worldmm.encoder import EncoderRejected, InProcessOfflineEncoder, OfflineVisualEmbedder
from worldmm.encoder.offline import CORE_DIM


@pytest.fixture(scope="module")
def embedder():
    return OfflineVisualEmbedder(1536, ocr_frames=2)


@pytest.fixture(scope="module")
def clips():
    return {
        "coffee": [sign("COFFEE SHOP", background=(40, 40, 40))] * 4,
        "pharmacy": [sign("PHARMACY", background=(40, 40, 40))] * 4,
        "red": [solid((210, 25, 25), size=(320, 240))] * 4,
        "green": [solid((30, 170, 50), size=(320, 240))] * 4,
    }


@pytest.fixture(scope="module")
def clip_vectors(embedder, clips):
    return dict(zip(clips, embedder.embed_videos(list(clips.values())), strict=True))


def _best(embedder, clip_vectors, query: str) -> str:
    q = embedder.embed_texts([query])[0]
    return max(clip_vectors, key=lambda name: float(clip_vectors[name] @ q))


def test_reads_the_text_in_the_frames(embedder, clips):
    assert "COFFEE SHOP" in clip_text(embedder, clips["coffee"]).upper()
    assert clip_text(embedder, clips["red"]) == ""


def test_vectors_are_unit_and_of_the_configured_dim(embedder, clip_vectors):
    for vector in clip_vectors.values():
        assert vector.shape == (1536,)
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
        assert not vector[CORE_DIM:].any()  # padded, not invented


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("the coffee shop sign", "coffee"),
        ("when was I at the pharmacy", "pharmacy"),
        ("something red", "red"),
        ("a green wall", "green"),
    ],
)
def test_a_text_query_finds_its_clip(embedder, clip_vectors, query, expected):
    assert _best(embedder, clip_vectors, query) == expected


def test_small_dimensions_use_a_fixed_projection(clips):
    small = OfflineVisualEmbedder(128, ocr_frames=1)
    again = OfflineVisualEmbedder(128, ocr_frames=1)
    red, green = small.embed_videos([clips["red"], clips["green"]])
    assert red.shape == (128,)
    np.testing.assert_allclose(red, again.embed_videos([clips["red"]])[0], atol=1e-6)
    query = small.embed_texts(["red"])[0]
    assert float(red @ query) > float(green @ query)


def test_in_process_encoder_matches_the_algorithm(embedder, clips):
    encoder = InProcessOfflineEncoder(1536, embedder=embedder)
    frames = [to_jpeg(f) for f in clips["red"]]

    async def main():
        return await encoder.encode_video(frames), await encoder.encode_text("red")

    video, text = asyncio.run(main())
    assert encoder.dim == 1536
    assert video.shape == text.shape == (1536,)
    np.testing.assert_allclose(text, embedder.embed_texts(["red"])[0], atol=1e-6)
    assert float(video @ text) > 0.5
    with pytest.raises(EncoderRejected, match="not a decodable image"):
        asyncio.run(encoder.encode_video([b"junk"]))
