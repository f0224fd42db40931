"""The mark a veiled frame carries: a JPEG comment segment, so the frame says itself that no
face detection reached it (the frames route reports it; an exported frame shows it to any
JPEG tool). Bytes only: the API reads it without loading OpenCV."""

from __future__ import annotations

VEIL_NOTE = b"WorldMM: veiled, no face detection (the detection budget was spent)"
_SEGMENT = b"\xff\xfe" + (len(VEIL_NOTE) + 2).to_bytes(2, "big") + VEIL_NOTE
_APP0 = b"\xff\xe0"  # the JFIF header, which must follow the start-of-image marker


def mark_veiled(jpeg: bytes) -> bytes:
    """``jpeg`` with the veil's comment after its start-of-image marker (and JFIF header)."""
    at = 2
    if jpeg[2:4] == _APP0:
        at = 4 + int.from_bytes(jpeg[4:6], "big")
    return jpeg[:at] + _SEGMENT + jpeg[at:]


def is_veiled(jpeg: bytes) -> bool:
    """The frame was stored veiled (its comment is where :func:`mark_veiled` puts it)."""
    return jpeg.find(_SEGMENT, 0, 64 + len(_SEGMENT)) != -1
