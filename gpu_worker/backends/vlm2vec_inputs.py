"""Pure preprocessing for Qwen2-VL video inputs (what Qwen2VLVideoProcessor does, without its
torchvision dependency): resize within a pixel budget, normalise, cut into patches."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image

# CLIP statistics, the Qwen2-VL processors' defaults.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class VisionGeometry:
    patch_size: int = 14
    merge_size: int = 2
    temporal_patch_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 360 * 420  # VLM2Vec-V2's per-frame cap for video
    mean: tuple[float, float, float] = CLIP_MEAN
    std: tuple[float, float, float] = CLIP_STD

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size


def fit_size(height: int, width: int, geo: VisionGeometry) -> tuple[int, int]:
    """Closest (h, w) keeping the aspect ratio, multiples of patch*merge, within the budget."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio of {width}x{height} is beyond 200:1")
    f = geo.factor
    h, w = max(f, round(height / f) * f), max(f, round(width / f) * f)
    if h * w > geo.max_pixels:
        beta = math.sqrt(height * width / geo.max_pixels)
        h = max(f, math.floor(height / beta / f) * f)
        w = max(f, math.floor(width / beta / f) * f)
    elif h * w < geo.min_pixels:
        beta = math.sqrt(geo.min_pixels / (height * width))
        h = math.ceil(height * beta / f) * f
        w = math.ceil(width * beta / f) * f
    return h, w


def video_patches(frames: list[Image.Image], geo: VisionGeometry) -> tuple[np.ndarray, tuple]:
    """Frames of one clip → (patches (N, C*tp*p*p) float32, grid (t, h, w)).

    Every frame is resized to the first frame's target size; an odd frame count repeats the
    last frame so the temporal patch is full.
    """
    height, width = fit_size(frames[0].height, frames[0].width, geo)
    arrays = [
        np.asarray(f.resize((width, height), Image.Resampling.BICUBIC), dtype=np.float32)
        for f in frames
    ]
    video = np.stack(arrays) / 255.0  # (T, H, W, C)
    video = (video - np.asarray(geo.mean, np.float32)) / np.asarray(geo.std, np.float32)
    video = video.transpose(0, 3, 1, 2)  # (T, C, H, W)
    tp, p, m = geo.temporal_patch_size, geo.patch_size, geo.merge_size
    if pad := -len(video) % tp:
        video = np.concatenate([video, np.repeat(video[-1:], pad, axis=0)])
    grid_t, grid_h, grid_w = len(video) // tp, height // p, width // p
    channels = video.shape[1]
    patches = video.reshape(grid_t, tp, channels, grid_h // m, m, p, grid_w // m, m, p)
    # → (t, h/m, w/m, m, m, C, tp, p, p): merge-neighbours adjacent, as the vision tower expects.
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = patches.reshape(grid_t * grid_h * grid_w, channels * tp * p * p)
    return np.ascontiguousarray(flat, dtype=np.float32), (grid_t, grid_h, grid_w)


def video_token_count(grid: tuple[int, int, int], geo: VisionGeometry) -> int:
    """How many <|video_pad|> tokens the language model sees for one clip."""
    t, h, w = grid
    return t * h * w // (geo.merge_size**2)
