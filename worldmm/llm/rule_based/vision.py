"""What the offline captioner can honestly read from frames: text (OCR) and simple scene cues."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, UnidentifiedImageError

from worldmm.media.jpeg import DECODE_CEILING_PIXELS
from worldmm.providers.errors import ModelCallError

_PALETTE: dict[str, tuple[int, int, int]] = {
    "black": (20, 20, 20),
    "white": (240, 240, 240),
    "grey": (128, 128, 128),
    "red": (200, 30, 30),
    "orange": (240, 140, 20),
    "yellow": (235, 220, 40),
    "green": (40, 160, 60),
    "blue": (40, 80, 200),
    "purple": (130, 50, 160),
    "pink": (240, 150, 190),
    "brown": (120, 75, 40),
}
_OCR_LOCK = threading.Lock()
_OCR = None


def _ocr_engine():
    """RapidOCR (ONNX, weights in the wheel), loaded once per process."""
    global _OCR
    with _OCR_LOCK:
        if _OCR is None:
            from rapidocr_onnxruntime import RapidOCR

            _OCR = RapidOCR()
        return _OCR


@dataclass
class SceneCues:
    brightness: str  # "dim" | "normally lit" | "bright"
    colours: list[str]  # dominant named colours, most common first
    motion: str  # "steady" | "changing"
    texts: list[str] = field(default_factory=list)


def _decode(jpeg: bytes) -> Image.Image:
    try:
        img = Image.open(io.BytesIO(jpeg))  # reads the header only
        if img.width * img.height > DECODE_CEILING_PIXELS:  # never decode a declared giant
            raise ModelCallError(
                f"offline captioner refuses a {img.width}x{img.height} frame (limit "
                f"{DECODE_CEILING_PIXELS} pixels)"
            )
        img.load()
    except (UnidentifiedImageError, OSError) as exc:
        raise ModelCallError(f"offline captioner could not decode a frame: {exc}") from exc
    return img.convert("RGB")


def _dominant_colours(pixels: np.ndarray, top: int = 2, min_share: float = 0.15) -> list[str]:
    names = list(_PALETTE)
    centres = np.asarray([_PALETTE[n] for n in names], dtype=np.float32)
    flat = pixels.reshape(-1, 3).astype(np.float32)
    nearest = np.argmin(((flat[:, None, :] - centres[None, :, :]) ** 2).sum(-1), axis=1)
    counts = np.bincount(nearest, minlength=len(names)) / max(len(flat), 1)
    order = np.argsort(-counts)
    return [names[i] for i in order[:top] if counts[i] >= min_share]


def scene_cues(
    frames: Sequence[bytes],
    *,
    ocr_frames: int = 4,
    min_score: float = 0.5,
    texts: Sequence[str] | None = None,
) -> SceneCues:
    """Brightness, dominant colours and motion over all frames; OCR on a few evenly spaced,
    unless the text read is given (``texts``: read elsewhere, at full size)."""
    if not frames:
        return SceneCues(brightness="unknown", colours=[], motion="steady", texts=list(texts or []))
    small = [np.asarray(_decode(f).resize((64, 48))) for f in frames]
    stack = np.stack(small).astype(np.float32)
    luma = float((stack @ np.asarray([0.299, 0.587, 0.114], dtype=np.float32)).mean())
    brightness = "dim" if luma < 70 else "bright" if luma > 170 else "normally lit"
    change = float(np.abs(stack[-1] - stack[0]).mean()) if len(small) > 1 else 0.0
    read = list(texts) if texts is not None else read_text(frames, ocr_frames, min_score)
    return SceneCues(
        brightness=brightness,
        colours=_dominant_colours(stack),
        motion="changing" if change > 25 else "steady",
        texts=read,
    )


def read_text(frames: Sequence[bytes], limit: int, min_score: float = 0.5) -> list[str]:
    """The text OCR reads in ``limit`` evenly spaced frames, as decoded (full size): each
    line once (case aside), in the order read."""
    if not frames or limit <= 0:
        return []
    picks = np.linspace(0, len(frames) - 1, num=min(limit, len(frames))).round().astype(int)
    seen: set[str] = set()
    out: list[str] = []
    engine = _ocr_engine()
    for i in dict.fromkeys(picks.tolist()):
        result, _ = engine(np.asarray(_decode(frames[i])))
        for _box, text, score in result or []:
            text = " ".join(str(text).split())
            if float(score) >= min_score and len(text) >= 2 and text.lower() not in seen:
                seen.add(text.lower())
                out.append(text)
    return out
