"""The wearer-hours `worldmm bench cost` prices: a busy one (EgoLife day 1's busiest hour of
captions and transcripts over frames that never repeat a view) and a quiet one (a desk: a
screen read for minutes at a time, two glances away, four things said), each a frame a
second. Frames come from small pools of pre-encoded JPEGs, so a view's frames differ by
jitter and noise while a synthetic hour stays quick to make.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from bench.egolife.data import Window

WINDOW_S = 30


@dataclass(frozen=True)
class Session:
    """One synthetic wearer-hour: the JPEG of each second, what was said in each 30 s window
    (by window index), and the captions the fake captioner answers with, in call order."""

    name: str
    frame_of: list[bytes]  # one per second
    said: dict[int, str]
    captions: list[str]


def textures(size: tuple[int, int], seed: int, n: int = 8) -> list[bytes]:
    """``n`` textured JPEGs (smooth colour fields plus sensor-like noise), quality 85."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        coarse = Image.fromarray(rng.integers(0, 255, (9, 16, 3), dtype=np.uint8))
        img = np.asarray(coarse.resize(size, Image.Resampling.BICUBIC), dtype=np.float32)
        img += rng.normal(0, 6, img.shape)
        out.append(_jpeg(Image.fromarray(img.clip(0, 255).astype(np.uint8))))
    return out


def busy(windows: list[Window], minutes: int, size: tuple[int, int], seed: int) -> Session:
    """EgoLife's busiest hour: its captions and transcripts, over frames that change every
    second (every window sends as many keyframes as the budget allows)."""
    jpegs = textures(size, seed)
    frames = [jpegs[k % len(jpegs)] for k in range(minutes * 60)]
    said = {i: w.transcript for i, w in enumerate(windows) if w.transcript.strip()}
    return Session("busy", frames, said, [w.caption for w in windows])


# --- the quiet hour -------------------------------------------------------------------------

_DOCS = {
    "report": (
        (250, 250, 250),
        "Q3 report - draft 4",
        [
            "Revenue grew 12% over Q2, led by the Berlin office.",
            "Churn fell to 3.1% after the support rota changed.",
            "Hiring: two engineers start on 14 October.",
            "Risks: the Lisbon lease ends in March.",
            "Next: send the draft to Dana before lunch.",
        ],
    ),
    "sheet": (
        (226, 244, 228),
        "budget_2026.xlsx",
        [
            "Team      Q1      Q2      Q3      Q4",
            "Berlin   41200   43900   45100   47000",
            "Lisbon   18800   19250   19400   20100",
            "Support   9600    9600   10200   10200",
            "Total    69600   72750   74700   77300",
        ],
    ),
    "mail": (
        (236, 240, 252),
        "Inbox - To: Dana Ruiz",
        [
            "Subject: Q3 report, draft 4",
            "Hi Dana, the draft is attached.",
            "The Lisbon numbers are still open.",
            "Can we talk at 1 pm?",
            "Thanks, Sam",
        ],
    ),
}
# (first minute, view): the desk with a document, a glance at the phone, one out of the window
_TIMELINE = [
    (0, "report"),
    (12, "sheet"),
    (20, "phone"),
    (21, "sheet"),
    (38, "mail"),
    (45, "outside"),
    (46, "mail"),
    (50, "report"),
]
# window index -> what was said in it
_SAID = {
    16: "I should send the report to Dana before lunch.",
    62: "Hi Dana. Yes, one o'clock works for me.",
    63: "I will bring the printed slides.",
    104: "Done, the report is sent.",
}
_DESK_CAPTIONS = [
    "I sat at my desk and read a document on my monitor; a white mug stood beside the "
    "keyboard and the office behind the screen was quiet.",
    "I kept working at my desk, reading the text on the screen and scrolling now and then; "
    "nobody else was around.",
]


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _desk(doc: str, size: tuple[int, int]) -> Image.Image:
    """The desk seen from the chair: wall, desk top, mug, keyboard, and a monitor showing
    ``doc`` in print small enough that a 512 px frame cannot be read."""
    w, h = size[0] + 16, size[1] + 16
    img = Image.new("RGB", (w, h), (196, 188, 172))
    d = ImageDraw.Draw(img)
    d.rectangle([0, int(h * 0.78), w, h], fill=(120, 84, 52))
    d.rectangle([int(w * 0.18), int(h * 0.06), int(w * 0.82), int(h * 0.70)], fill=(30, 30, 34))
    paper, title, lines = _DOCS[doc]
    x0, y0, x1 = int(w * 0.20), int(h * 0.09), int(w * 0.80)
    d.rectangle([x0, y0, x1, int(h * 0.67)], fill=paper)
    d.rectangle([x0, y0, x1, y0 + 34], fill=(60, 90, 150))
    d.text((x0 + 12, y0 + 6), title, fill=(255, 255, 255), font=_font(20))
    for i, line in enumerate(lines):
        d.text((x0 + 24, y0 + 56 + 34 * i), line, fill=(20, 20, 20), font=_font(18))
    d.rectangle([int(w * 0.30), int(h * 0.82), int(w * 0.66), int(h * 0.92)], fill=(50, 50, 54))
    d.ellipse([int(w * 0.74), int(h * 0.76), int(w * 0.80), int(h * 0.90)], fill=(245, 245, 245))
    return img


def _phone(size: tuple[int, int]) -> Image.Image:
    w, h = size[0] + 16, size[1] + 16
    img = Image.new("RGB", (w, h), (120, 84, 52))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle([int(w * 0.36), int(h * 0.05), int(w * 0.64), int(h * 0.98)], 30, (15,) * 3)
    d.rectangle([int(w * 0.38), int(h * 0.12), int(w * 0.62), int(h * 0.90)], fill=(240, 240, 240))
    d.text((int(w * 0.40), int(h * 0.20)), "Dana Ruiz", fill=(0, 0, 0), font=_font(26))
    d.text((int(w * 0.40), int(h * 0.30)), "Lunch at 1 pm?", fill=(0, 0, 0), font=_font(22))
    return img


def _outside(size: tuple[int, int]) -> Image.Image:
    w, h = size[0] + 16, size[1] + 16
    img = Image.new("RGB", (w, h), (150, 190, 230))
    d = ImageDraw.Draw(img)
    d.rectangle([0, int(h * 0.6), w, h], fill=(90, 120, 80))
    for i in range(5):
        x = 80 + i * w // 5
        d.rectangle([x, int(h * 0.3), x + 120, int(h * 0.6)], fill=(170, 160, 150))
    return img


def _view(name: str, size: tuple[int, int]) -> Image.Image:
    if name == "phone":
        return _phone(size)
    if name == "outside":
        return _outside(size)
    return _desk(name, size)


def _jittered(base: Image.Image, size: tuple[int, int], rng, n: int) -> list[bytes]:
    """``n`` frames of one view: head movement (up to 1/160 of the width) and sensor noise."""
    out, reach = [], max(2, size[0] // 160) + 1
    for _ in range(n):
        dx, dy = (int(v) for v in rng.integers(0, reach, 2))
        crop = np.asarray(base.crop((dx, dy, dx + size[0], dy + size[1])), dtype=np.float32)
        crop += rng.normal(0, 3, crop.shape)
        out.append(_jpeg(Image.fromarray(crop.clip(0, 255).astype(np.uint8))))
    return out


def quiet(minutes: int, size: tuple[int, int], seed: int, pool: int = 6) -> Session:
    """An hour at a desk: views from :data:`_TIMELINE`, speech from :data:`_SAID`."""
    rng = np.random.default_rng(seed)
    views = {name for _, name in _TIMELINE}
    frames_of = {name: _jittered(_view(name, size), size, rng, pool) for name in sorted(views)}
    frames = []
    for k in range(minutes * 60):
        name = next(v for start, v in reversed(_TIMELINE) if k >= start * 60)
        frames.append(frames_of[name][k % pool])
    said = {i: text for i, text in _SAID.items() if i < minutes * 2}
    return Session("quiet", frames, said, _DESK_CAPTIONS * (minutes * 2))


def _jpeg(img: Image.Image, quality: int = 85) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return buf.getvalue()
