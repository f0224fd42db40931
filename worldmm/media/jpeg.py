"""A JPEG's declared pixel size, read from its frame header without decoding anything.

Every decode of a frame (face detection, the veil, the offline captioner) allocates what the
header declares: a 2 kB file can declare 65,535 × 65,535 pixels (12 GB decoded). The ingest
codec refuses frames over the configured maximum, and every decoder in the core checks the
header against :data:`DECODE_CEILING_PIXELS` first, so bytes that reached the store another
way (a retrigger, an older row) cannot make it allocate either.
"""

from __future__ import annotations

# Start-of-frame markers (baseline, progressive, lossless, arithmetic): they carry the size.
_SOF_MARKERS = frozenset({*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC),
                          *range(0xCD, 0xD0)})  # fmt: skip
# Markers without a length field: TEM and the restart markers.
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})

# Past this no decoder in the core runs (the codec's own limit is a setting below it).
DECODE_CEILING_PIXELS = 64_000_000


class JpegError(ValueError):
    """Not a structurally valid JPEG (the message says where it breaks)."""


def frame_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a JPEG from its frame header: SOI, whole marker segments up to the
    start of scan with a frame header of non-zero size, and EOI at the end. JpegError
    otherwise. Walks the markers itself (no image library: this runs for every frame)."""
    if not data.startswith(b"\xff\xd8"):
        kind = "PNG" if data.startswith(b"\x89PNG") else "GIF" if data[:3] == b"GIF" else None
        raise JpegError(f"payload is {kind}, not JPEG" if kind else "no SOI marker")
    n, i, size = len(data), 2, None
    while True:
        if i + 2 > n:
            raise JpegError("truncated before the image data")
        if data[i] != 0xFF:
            raise JpegError(f"no marker at byte {i}")
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _STANDALONE:
            i += 2
            continue
        if marker in (0xD8, 0xD9):
            raise JpegError("image ends before its data")
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if length < 2 or i + 2 + length > n:
            raise JpegError("truncated marker segment")
        if marker in _SOF_MARKERS:
            if length < 8:
                raise JpegError("short frame header")
            height = int.from_bytes(data[i + 5 : i + 7], "big")
            width = int.from_bytes(data[i + 7 : i + 9], "big")
            size = (width, height)
        if marker == 0xDA:  # start of scan: entropy-coded data follows
            break
        i += 2 + length
    if size is None or 0 in size:
        raise JpegError(f"frame size {size}")
    if b"\xff\xd9" not in data[-64:]:
        raise JpegError("no EOI marker (truncated?)")
    return size


def check_decodable(data: bytes, max_pixels: int = DECODE_CEILING_PIXELS) -> tuple[int, int]:
    """The frame's size if a decoder may allocate it; JpegError for bytes that are no JPEG or
    declare more than ``max_pixels``. Called before every decode."""
    width, height = frame_size(data)
    if width * height > max_pixels:
        raise JpegError(f"declares {width}x{height} pixels, more than {max_pixels} allowed")
    return width, height
