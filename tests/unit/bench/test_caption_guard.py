"""The quality guard fails when the caption call is not given a text the old path read: a
sign that changes while the view barely does is read in one keyframe only."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw

from bench.caption_guard import kept, text_guard
from worldmm.settings import load_settings


def room(sign: str, wall: tuple[int, int, int] = (200, 190, 170)) -> bytes:
    """A 640x360 room with a sign reading ``sign`` in large letters on a small plate."""
    img = Image.new("RGB", (640, 360), wall)
    d = ImageDraw.Draw(img)
    d.rectangle([0, 250, 640, 360], fill=(110, 80, 50))
    d.rectangle([40, 30, 240, 100], fill=(255, 255, 255))
    d.text((60, 40), sign, fill=(0, 0, 0), font_size=44)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def test_texts_match_as_ocr_reads_them() -> None:
    assert kept("Buy milk", ["KITCHEN", "Buymilk"]) and kept("Hiring: two", ["Hring two"])
    assert not kept("CLOSED", ["OPEN"])


def test_the_guard_fails_on_a_text_the_keyframes_miss() -> None:
    settings = load_settings()
    # half the window shows OPEN, half CLOSED: the view hardly changes, one keyframe is sent
    changed = text_guard([room("OPEN")] * 15 + [room("CLOSED")] * 15, settings)
    assert changed["ok"] is False and [x["text"] for x in changed["lost"]] == ["CLOSED"]
    # a cut to another room is a new keyframe: both texts go with the call
    cut = text_guard([room("OPEN")] * 15 + [room("EXIT", (60, 90, 160))] * 15, settings)
    assert cut["ok"] is True and cut["texts_read_before"] == 2 == cut["texts_given_now"]
    # frames sent as captured, every sampled one: nothing can be lost
    old = load_settings(caption_frames=16, caption_frame_choice="uniform")
    assert text_guard([room("OPEN")] * 15 + [room("CLOSED")] * 15, old)["ok"] is True
