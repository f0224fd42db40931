"""Which of a window's frames a caption call needs: keyframes chosen by visual change.

A frame's look is a colour histogram (HSV) and a difference hash of its grey thumbnail; two
looks differ by the larger of the two distances, so a cut (new colours) and a pan (same
colours, moved edges) both count as change while head jitter and sensor noise do not. Pure
functions over JPEG bytes: no store, no models.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

_HIST_BINS = (8, 4, 4)  # hue, saturation, value
_HASH_SIZE = 8  # an 8 x 8 difference hash: 64 bits
_THUMB = (64, 36)  # the size looks are taken at


@dataclass(frozen=True)
class Look:
    """What a frame shows, coarsely: its HSV histogram (shares, summing to 1) and the
    difference hash of its grey thumbnail."""

    histogram: np.ndarray
    dhash: int


def look(jpeg: bytes) -> Look:
    """The look of one JPEG (decoded at a reduced scale: a few milliseconds a frame)."""
    img = Image.open(io.BytesIO(jpeg))
    img.draft("RGB", (_THUMB[0] * 2, _THUMB[1] * 2))  # JPEG decodes at 1/2..1/8 scale
    small = img.convert("RGB").resize(_THUMB, Image.Resampling.BILINEAR)
    hsv = np.asarray(small.convert("HSV"), dtype=np.int32).reshape(-1, 3)
    bins = [(hsv[:, i] * n) // 256 for i, n in enumerate(_HIST_BINS)]
    flat = (bins[0] * _HIST_BINS[1] + bins[1]) * _HIST_BINS[2] + bins[2]
    hist = np.bincount(flat, minlength=int(np.prod(_HIST_BINS))).astype(np.float32)
    grey = np.asarray(
        small.convert("L").resize((_HASH_SIZE + 1, _HASH_SIZE), Image.Resampling.BILINEAR),
        dtype=np.int16,
    )
    bits = (grey[:, 1:] > grey[:, :-1]).flatten()
    dhash = int("".join("1" if b else "0" for b in bits), 2)
    return Look(hist / hist.sum(), dhash)


def change(a: Look, b: Look) -> float:
    """How different two looks are, from 0 (the same) to 1: the larger of the histograms'
    total variation distance and the share of hash bits that differ."""
    colours = 0.5 * float(np.abs(a.histogram - b.histogram).sum())
    edges = (a.dhash ^ b.dhash).bit_count() / (_HASH_SIZE * _HASH_SIZE)
    return max(colours, edges)


def stretches(looks: Sequence[Look], threshold: float) -> tuple[list[int], list[float]]:
    """Where each stretch of one view starts, and the change that started it (1 for the
    first): a stretch ends where a frame differs from the stretch's first by ``threshold``
    or more."""
    if not looks:
        return [], []
    starts, jumps = [0], [1.0]
    for i in range(1, len(looks)):
        moved = change(looks[starts[-1]], looks[i])
        if moved >= threshold:
            starts.append(i)
            jumps.append(moved)
    return starts, jumps


def choose_keyframes(looks: Sequence[Look], most: int, threshold: float) -> list[int]:
    """Indices (in time order) of at most ``most`` frames that show what the window showed.

    Each stretch of one view (:func:`stretches`) is shown by its middle frame; when there
    are more stretches than ``most``, those that began with the largest change are kept (the
    first stretch always). A static window gives one frame, a cut two, a pan one per
    ``threshold`` of travel."""
    if not looks or most <= 0:
        return []
    starts, jumps = stretches(looks, threshold)
    ends = [*starts[1:], len(looks)]
    middles = [(s + e - 1) // 2 for s, e in zip(starts, ends, strict=True)]
    if len(middles) <= most:
        return middles
    kept = sorted(range(len(middles)), key=lambda k: (-jumps[k], k))[:most]
    return [middles[k] for k in sorted(kept)]


def uniform(n: int, most: int) -> list[int]:
    """``most`` indices spread evenly over ``n`` (the middle of equal bins); all if fewer."""
    if most <= 0:
        return []
    if n <= most:
        return list(range(n))
    return [min(n - 1, int((i + 0.5) * n / most)) for i in range(most)]


def shrink(jpeg: bytes, longest_side: int, quality: int = 85) -> bytes:
    """``jpeg`` scaled down so its longer side is at most ``longest_side`` (0: as it is);
    a frame already small enough is returned untouched."""
    if longest_side <= 0:
        return jpeg
    img = Image.open(io.BytesIO(jpeg))
    if max(img.size) <= longest_side:
        return jpeg
    scale = longest_side / max(img.size)
    img.draft("RGB", (round(img.size[0] * scale), round(img.size[1] * scale)))
    img = img.convert("RGB")
    img.thumbnail((longest_side, longest_side), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return buf.getvalue()
