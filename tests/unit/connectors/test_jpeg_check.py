"""The JPEG structure check (a marker walk) accepts what encoders write and rejects cut or
foreign payloads the way Pillow's header parse did."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from connectors import codec


def _jpeg(**save) -> bytes:
    buf = io.BytesIO()
    img = Image.new("RGB", (64, 48), (10, 200, 30))
    img.paste((200, 10, 10), (5, 5, 30, 30))
    img.save(buf, format="JPEG", **save)
    return buf.getvalue()


@pytest.mark.parametrize(
    "save",
    [{"quality": 80}, {"progressive": True}, {"optimize": True}, {"exif": b"Exif\x00\x00MM"}],
)
def test_encoder_output_passes(save) -> None:
    data = _jpeg(**save)
    codec.check_jpeg(data)
    with Image.open(io.BytesIO(data)) as img:  # and Pillow agrees it is a JPEG
        assert img.format == "JPEG"


@pytest.mark.parametrize("cut", [1, 3, 20, 100, 200, -1, -40])
def test_truncated_jpeg_is_rejected(cut: int) -> None:
    data = _jpeg(quality=80)
    with pytest.raises(codec.InvalidMessage) as err:
        codec.check_jpeg(data[:cut])
    assert err.value.reason == codec.BAD_JPEG


def test_other_formats_are_named() -> None:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="PNG")
    with pytest.raises(codec.InvalidMessage, match="payload is PNG, not JPEG"):
        codec.check_jpeg(buf.getvalue())
