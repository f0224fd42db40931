import numpy as np
import pytest
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from gpu_worker.backends.vlm2vec_inputs import (
    VisionGeometry,
    fit_size,
    video_patches,
    video_token_count,
)
from tests.fixtures.images import noise

GEO = VisionGeometry()


@pytest.mark.parametrize("size", [(1280, 720), (640, 480), (1920, 1080), (720, 1280), (50, 40)])
def test_fit_size_keeps_budget_and_patch_grid(size):
    width, height = size
    h, w = fit_size(height, width, GEO)
    assert h % 28 == 0 and w % 28 == 0
    assert h * w <= GEO.max_pixels
    assert h * w >= GEO.min_pixels
    assert abs((w / h) - (width / height)) / (width / height) < 0.25


def test_still_clip_patches_match_transformers_image_processor():
    """Two identical frames patchify exactly like Qwen2-VL's own processor does one image."""
    image = noise(3, size=(150, 100))
    processor = Qwen2VLImageProcessorPil(
        size={"shortest_edge": GEO.min_pixels, "longest_edge": GEO.max_pixels}
    )
    expected = processor(images=[image], return_tensors="np")
    patches, grid = video_patches([image, image], GEO)
    assert grid == tuple(expected["image_grid_thw"][0])
    np.testing.assert_allclose(patches, expected["pixel_values"], atol=1e-5)


def test_odd_frame_count_repeats_last_frame():
    frames = [noise(i) for i in range(3)]
    patches, grid = video_patches(frames, GEO)
    padded, grid4 = video_patches([*frames, frames[-1]], GEO)
    assert grid == grid4 == (2, grid[1], grid[2])
    np.testing.assert_array_equal(patches, padded)
    assert video_token_count(grid, GEO) == 2 * grid[1] * grid[2] // 4


def test_hd_frames_are_capped_at_360_by_420_pixels():
    frames = [noise(i, size=(1280, 720)) for i in range(16)]
    patches, (t, h, w) = video_patches(frames, GEO)
    assert t == 8
    assert (h * 14) * (w * 14) <= 360 * 420
    assert patches.shape == (t * h * w, 3 * 2 * 14 * 14)
