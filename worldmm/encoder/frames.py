"""Decoding and validating the frames of one clip (shared by the service and the in-process
encoder, so both reject the same inputs with the same messages)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from PIL import Image, UnidentifiedImageError

from worldmm.encoder.base import EncoderRejected

MAX_FRAMES = 16
MAX_FRAME_BYTES = 8 * 1024 * 1024
MAX_FRAME_SIDE = 4096
MAX_TEXT_CHARS = 2000


class InvalidInput(EncoderRejected, ValueError):
    """An input the encoder refuses (bad frame count, undecodable image, text too long)."""


def decode_frames(
    frames: Sequence[bytes],
    *,
    max_frames: int = MAX_FRAMES,
    max_bytes: int = MAX_FRAME_BYTES,
    max_side: int = MAX_FRAME_SIDE,
) -> list[Image.Image]:
    """Decode JPEG/PNG bytes into RGB images; raise InvalidInput naming the bad frame."""
    if not frames:
        raise InvalidInput("a clip needs at least one frame, got 0")
    if len(frames) > max_frames:
        raise InvalidInput(f"a clip has at most {max_frames} frames, got {len(frames)}")
    images = []
    for index, data in enumerate(frames):
        if len(data) > max_bytes:
            raise InvalidInput(f"frame {index}: {len(data)} bytes exceeds the {max_bytes} limit")
        try:
            image = Image.open(io.BytesIO(data))
            # The header gives the size before pixels are decoded: refuse huge images cheaply.
            if max(image.size) > max_side:
                raise InvalidInput(
                    f"frame {index}: {image.size[0]}x{image.size[1]} exceeds {max_side} px a side"
                )
            images.append(image.convert("RGB"))
        except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
            raise InvalidInput(f"frame {index}: not a decodable image ({exc})") from None
    return images


def check_text(text: str, *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """Strip and validate a query text; raise InvalidInput when empty or too long."""
    stripped = text.strip()
    if not stripped:
        raise InvalidInput("the query text is empty")
    if len(stripped) > max_chars:
        raise InvalidInput(f"the query text has {len(stripped)} characters, limit {max_chars}")
    return stripped
