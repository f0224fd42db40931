import numpy as np
import pytest

from tests.fixtures.images import solid, to_jpeg
from worldmm.encoder.colours import (
    COLOURS,
    clip_colour_vector,
    colour_fractions,
    query_colour_vector,
)
from worldmm.encoder.frames import InvalidInput, check_text, decode_frames


def test_decode_frames_accepts_jpegs():
    images = decode_frames([to_jpeg(solid((10, 20, 30)))] * 3)
    assert [im.size for im in images] == [(96, 64)] * 3
    assert images[0].mode == "RGB"


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ([], "at least one frame"),
        ([to_jpeg(solid((0, 0, 0)))] * 17, "at most 16 frames, got 17"),
        ([to_jpeg(solid((0, 0, 0))), b"not an image"], "frame 1: not a decodable image"),
        ([to_jpeg(solid((0, 0, 0), size=(5000, 10)))], "frame 0: 5000x10 exceeds 4096"),
    ],
)
def test_decode_frames_rejects_bad_clips(frames, message):
    with pytest.raises(InvalidInput, match=message):
        decode_frames(frames)


def test_decode_frames_rejects_oversized_bytes():
    with pytest.raises(InvalidInput, match="exceeds the 1024 limit"):
        decode_frames([b"x" * 2048], max_bytes=1024)


def test_check_text():
    assert check_text("  red door ") == "red door"
    with pytest.raises(InvalidInput, match="empty"):
        check_text("   ")
    with pytest.raises(InvalidInput, match="limit 10"):
        check_text("x" * 11, max_chars=10)


@pytest.mark.parametrize(
    ("rgb", "name"),
    [
        ((220, 20, 20), "red"),
        ((240, 140, 20), "orange"),
        ((230, 220, 30), "yellow"),
        ((30, 180, 40), "green"),
        ((30, 60, 200), "blue"),
        ((130, 40, 180), "purple"),
        ((250, 160, 190), "pink"),
        ((120, 70, 20), "brown"),
        ((10, 10, 10), "black"),
        ((245, 245, 245), "white"),
        ((128, 128, 128), "gray"),
    ],
)
def test_colour_fractions_name_plain_colours(rgb, name):
    fractions = colour_fractions(solid(rgb))
    assert COLOURS[int(np.argmax(fractions))] == name
    assert fractions.sum() == pytest.approx(1.0)


def test_colour_vectors_meet_in_one_space():
    half_red = [solid((220, 20, 20)), solid((30, 60, 200))]
    clip = clip_colour_vector(half_red)
    assert np.linalg.norm(clip) == pytest.approx(1.0, abs=1e-5)
    red = query_colour_vector("the RED door")
    assert float(clip @ red) == pytest.approx(np.sqrt(0.5), abs=0.02)
    assert float(clip @ query_colour_vector("a green tree")) == pytest.approx(0.0, abs=0.02)
    assert not query_colour_vector("no colour named here").any()
    assert query_colour_vector("grey") @ query_colour_vector("gray") == pytest.approx(1.0)
