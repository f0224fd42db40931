"""Named-colour distributions: the part of the offline visual embedding a colour word in a
query can match. Pure functions over pixels and words."""

from __future__ import annotations

import re

import numpy as np
from PIL import Image

COLOURS = (
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "brown",
    "black",
    "white",
    "gray",
)
_SYNONYMS = {"grey": "gray", "violet": "purple", "navy": "blue", "crimson": "red", "beige": "brown"}
_INDEX = {name: i for i, name in enumerate(COLOURS)}
_THUMB = 64


def colour_fractions(image: Image.Image) -> np.ndarray:
    """Fraction of pixels in each named colour (sums to 1), from a 64×64 HSV thumbnail."""
    hsv = np.asarray(image.convert("RGB").resize((_THUMB, _THUMB)).convert("HSV"), np.float32)
    h, s, v = hsv[..., 0] * (360 / 255), hsv[..., 1] / 255, hsv[..., 2] / 255
    labels = np.full(h.shape, _INDEX["gray"])
    chromatic = (s >= 0.2) & (v >= 0.2)
    hue_bands = (  # (name, low, high) in degrees
        ("red", 0, 15),
        ("orange", 15, 40),
        ("yellow", 40, 70),
        ("green", 70, 170),
        ("blue", 170, 260),
        ("purple", 260, 300),
        ("pink", 300, 345),
        ("red", 345, 361),
    )
    for name, low, high in hue_bands:
        labels[chromatic & (h >= low) & (h < high)] = _INDEX[name]
    labels[chromatic & (h >= 15) & (h < 40) & (v < 0.6)] = _INDEX["brown"]
    labels[chromatic & ((h < 15) | (h >= 345)) & (s < 0.5) & (v > 0.7)] = _INDEX["pink"]
    labels[~chromatic & (v >= 0.85)] = _INDEX["white"]
    labels[v < 0.2] = _INDEX["black"]
    counts = np.bincount(labels.ravel(), minlength=len(COLOURS)).astype(np.float32)
    return counts / counts.sum()


def clip_colour_vector(images: list[Image.Image]) -> np.ndarray:
    """Unit vector: square roots of the clip's mean colour fractions (a Hellinger embedding,
    so its cosine with a one-colour query is sqrt(share of that colour))."""
    mean = np.mean([colour_fractions(im) for im in images], axis=0)
    return np.sqrt(mean).astype(np.float32)


def query_colour_vector(text: str) -> np.ndarray:
    """Unit vector over the colour words a query names; all zeros when it names none."""
    vec = np.zeros(len(COLOURS), np.float32)
    for word in re.findall(r"[a-z]+", text.lower()):
        name = _SYNONYMS.get(word, word)
        if name in _INDEX:
            vec[_INDEX[name]] = 1.0
    norm = np.linalg.norm(vec)
    return vec / norm if norm else vec
