"""Test frames drawn with PIL (kept local so these tests depend on nothing else)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def to_jpeg(image: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def solid(color: tuple[int, int, int], size: tuple[int, int] = (96, 64)) -> Image.Image:
    return Image.new("RGB", size, color)


def noise(seed: int, size: tuple[int, int] = (96, 64)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8))


def sign(
    text: str, background: tuple[int, int, int] = (30, 70, 160), size: tuple[int, int] = (480, 320)
) -> Image.Image:
    """Large white text on a plain background, legible to OCR."""
    image = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=size[1] // 7)
    draw.text((size[0] // 12, size[1] // 2 - size[1] // 12), text, fill=(255, 255, 255), font=font)
    return image
