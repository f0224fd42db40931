"""Keyframes by visual change: a static window sends one frame, a cut two, a pan more, and
never more than the budget; frames are shrunk to the budget's side."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from PIL import Image, ImageDraw

from worldmm.memory.caption_frames import caption_images, plan_frames
from worldmm.memory.keyframes import change, choose_keyframes, look, shrink, uniform
from worldmm.memory.window_inputs import sample_uniform
from worldmm.settings import load_settings

W, H = 1280, 720
THRESHOLD = 0.25


def _jpeg(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=85)
    return buf.getvalue()


def _room(seed: int, width: int = W + 40) -> Image.Image:
    """A room: a coloured wall and floor, a few objects and a sign."""
    rng = random.Random(seed)
    wall = tuple(rng.randint(60, 230) for _ in range(3))
    img = Image.new("RGB", (width, H + 40), wall)
    d = ImageDraw.Draw(img)
    d.rectangle([0, int(H * 0.7), width, H + 40], fill=tuple(c // 2 for c in wall))
    for _ in range(12):
        x, y = rng.randint(0, width - 200), rng.randint(0, H - 150)
        colour = tuple(rng.randint(0, 255) for _ in range(3))
        d.rectangle([x, y, x + rng.randint(60, 200), y + rng.randint(40, 150)], fill=colour)
    d.text((60, 40), "KITCHEN", fill=(255, 255, 255), font_size=64)
    return img


def _static(seed: int, n: int = 16) -> list[bytes]:
    """A still view with head jitter (a few pixels) and sensor noise."""
    base, rng = _room(seed), np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dx, dy = (int(v) for v in rng.integers(0, 12, 2))
        crop = np.asarray(base.crop((dx, dy, dx + W, dy + H)), dtype=np.float32)
        crop += rng.normal(0, 4, crop.shape)
        out.append(_jpeg(Image.fromarray(crop.clip(0, 255).astype(np.uint8))))
    return out


def _pan(n: int = 16, step: int = 48) -> list[bytes]:
    """The head turning across a wide room, ``step`` px a frame."""
    wide = _room(5, width=W + n * step)
    return [_jpeg(wide.crop((i * step, 0, i * step + W, H))) for i in range(n)]


def _chosen(frames: list[bytes], most: int = 4) -> list[int]:
    return choose_keyframes([look(f) for f in frames], most, THRESHOLD)


def test_a_static_window_sends_one_frame() -> None:
    frames = _static(1)
    looks = [look(f) for f in frames]
    assert max(change(looks[0], lk) for lk in looks) < 0.1  # jitter and noise are no change
    assert _chosen(frames) == [7]  # the middle of its one stretch


def test_a_cut_sends_one_frame_from_each_side() -> None:
    frames = _static(1, 9) + _static(2, 7)
    assert change(look(frames[0]), look(frames[-1])) > 0.3
    (a, b) = _chosen(frames)
    assert a < 9 <= b


def test_a_pan_sends_more_and_never_more_than_the_budget() -> None:
    frames = _pan()
    steps = [change(look(a), look(b)) for a, b in zip(frames, frames[1:], strict=False)]
    assert max(steps) < THRESHOLD  # each frame moves a little; the view moves a lot
    chosen = {most: _chosen(frames, most) for most in (1, 2, 3, 4, 6, 16)}
    assert len(chosen[16]) >= 3 and chosen[16] == sorted(chosen[16])
    for most, picked in chosen.items():
        assert 1 <= len(picked) <= most and set(picked) <= set(chosen[16])
    # a panning window sends more frames than a still one at the same budget
    assert len(chosen[4]) > len(_chosen(_static(3)))


def test_the_budget_holds_for_any_sequence() -> None:
    rng = np.random.default_rng(0)
    flat = [
        _jpeg(Image.new("RGB", (64, 36), tuple(int(c) for c in rng.integers(0, 256, 3))))
        for _ in range(24)
    ]
    for most in range(0, 8):
        for n in (0, 1, 5, 24):
            picked = choose_keyframes([look(f) for f in flat[:n]], most, THRESHOLD)
            assert len(picked) <= min(most, n) and picked == sorted(set(picked))


def test_uniform_is_the_old_sampling() -> None:
    for n, k in ((30, 16), (16, 16), (5, 16), (16, 4)):
        assert uniform(n, k) == sample_uniform(list(range(n)), k)


def test_frames_are_shrunk_to_the_budget_side() -> None:
    big, small = _static(1, 1)[0], _jpeg(Image.new("RGB", (320, 240), (9, 9, 9)))
    assert Image.open(io.BytesIO(shrink(big, 512))).size == (512, 288)
    assert shrink(small, 512) is small and shrink(big, 0) is big


@pytest.mark.parametrize("kind", ["static", "pan", "cut"])
def test_the_plan_never_exceeds_the_budget(kind: str) -> None:
    frames = {"static": _static(4), "pan": _pan(), "cut": _static(1, 8) + _static(2, 8)}[kind]
    settings = load_settings(caption_frames=3)
    plan = plan_frames(frames, settings)
    images = caption_images(frames, plan, settings)
    assert 1 <= len(images) <= 3
    assert all(max(Image.open(io.BytesIO(i)).size) <= 512 for i in images)
    assert (plan.one_view is not None) == (kind == "static")
    # the behaviour before: every sampled frame, as captured, and no looks taken
    old = load_settings(
        caption_frames=16,
        caption_frame_choice="uniform",
        caption_frame_side=0,
        still_window_change=0,
    )
    plan = plan_frames(frames, old)
    assert plan.looks is None and caption_images(frames, plan, old) == frames
