"""A generated camera-glasses session for tests, the demo and benchmarks.

Frames are drawn with PIL: a room per scene with a large sign ("KITCHEN"), simple objects
(a red mug, a blue laptop, a green plant...), sticky notes with readable text ("Buy milk"),
and a small clock in the corner showing the capture time. Audio is real speech from
``espeak-ng`` — lines that match the scenes — placed at the scene times in one 16 kHz mono
WAV with silence between. The same seed gives the same session.

Speed: each scene is rendered once; a frame is a jittered crop of it plus the clock, so a
12-minute session at 1 fps (720 frames) takes a few seconds.
"""

from __future__ import annotations

import functools
import io
import json
import random
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from pydantic import AwareDatetime, BaseModel, Field

SAMPLE_RATE = 16_000
FRAME_SIZE = (640, 480)
JPEG_QUALITY = 80
_JITTER = 6  # px of simulated head movement between frames


class SyntheticError(RuntimeError):
    """The generator cannot run (e.g. espeak-ng missing)."""


class SceneSpec(BaseModel):
    """One scene: where the wearer is, what is visible and what is said."""

    sign: str = Field(description="Large sign text naming the place, e.g. 'KITCHEN'.")
    objects: list[str] = Field(default_factory=list, description="Names from OBJECT_SHAPES.")
    notes: list[str] = Field(default_factory=list, description="Sticky-note texts.")
    speech: list[str] = Field(default_factory=list, description="Lines spoken in the scene.")
    duration_s: float | None = Field(
        default=None, gt=0, description="Length; None = seeded random 30–60 s."
    )
    background: tuple[int, int, int] | None = None


class SpokenLine(BaseModel):
    text: str
    start: AwareDatetime
    end: AwareDatetime


class SceneTiming(BaseModel):
    index: int
    spec: SceneSpec
    start: AwareDatetime
    end: AwareDatetime
    spoken: list[SpokenLine] = Field(default_factory=list)


class SessionFiles(BaseModel):
    frames_dir: Path
    audio_wav: Path | None
    scenes: list[SceneTiming]
    start: AwareDatetime
    fps: float
    n_frames: int
    duration_s: float
    manifest: Path

    def scene_at(self, ts: datetime) -> SceneTiming | None:
        return next((s for s in self.scenes if s.start <= ts < s.end), None)


def _scene(sign: str, objects: str, *speech: str, notes: str = "") -> SceneSpec:
    """A scene from short text: ``objects`` and ``notes`` comma-separated, one line a speech."""
    return SceneSpec(
        sign=sign,
        objects=[o for o in objects.split(", ") if o],
        notes=[n for n in notes.split(", ") if n],
        speech=list(speech),
    )


# Scenes that more than one script uses (the default day below, the demo's session).
KITCHEN_MUG = _scene(
    "KITCHEN", "red mug, white bowl, table", "I am putting the red mug on the kitchen table."
)
FRIDGE_NOTE = _scene(
    "KITCHEN", "fridge", "The note on the fridge says buy milk and eggs.", notes="Buy milk, Eggs"
)
HALLWAY_KEYS = _scene(
    "HALLWAY", "yellow keys, white bowl", "I left my car keys in the white bowl by the front door."
)
MEETING_ALICE = _scene(
    "MEETING ROOM 3",
    "blue laptop, table, person Alice",
    "Alice said the meeting moved to three pm.",
    "Bob will bring the slides.",
)
OFFICE_DENTIST = _scene(
    "OFFICE",
    "blue laptop, green plant",
    "I need to call the dentist before Friday.",
    notes="Call the dentist",
)
PARKING = _scene("PARKING LOT", "car", "I parked the car on level two, spot B.", notes="Level 2 B")

# A short day of a wearer; questions about it have clear answers (where are the keys, what
# did Alice say, what is on the shopping list).
DEFAULT_SCRIPT: list[SceneSpec] = [
    KITCHEN_MUG,
    FRIDGE_NOTE,
    HALLWAY_KEYS,
    MEETING_ALICE,
    OFFICE_DENTIST,
    _scene(
        "CAFE",
        "red mug, orange book",
        "I ordered a cappuccino and started reading the orange book.",
    ),
    _scene(
        "SUPERMARKET",
        "milk carton, bananas",
        "The milk costs one dollar forty nine today.",
        notes="MILK 1.49",
    ),
    _scene(
        "LIVING ROOM", "green plant, black phone", "I watered the green plant next to the window."
    ),
    _scene("GYM", "water bottle", "I ran five kilometers on the treadmill."),
    PARKING,
    _scene("BEDROOM", "orange book, black phone", "I put my phone on the nightstand to charge."),
    _scene(
        "MEETING ROOM 3",
        "blue laptop, person Alice",
        "Alice asked me to send the budget by Monday.",
        notes="Budget review",
    ),
]

_LARGE = {"fridge", "car"}

_PLACE_COLORS = {
    "KITCHEN": (236, 224, 200),
    "HALLWAY": (214, 206, 190),
    "MEETING ROOM 3": (210, 218, 228),
    "OFFICE": (222, 226, 230),
    "CAFE": (230, 210, 185),
    "SUPERMARKET": (240, 240, 236),
    "LIVING ROOM": (226, 214, 204),
    "GYM": (200, 206, 214),
    "PARKING LOT": (170, 170, 172),
    "BEDROOM": (214, 204, 226),
}


def _is_large(name: str) -> bool:
    return name.lower() in _LARGE or name.lower().startswith("person ")


# --- drawing --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _draw_object(d: ImageDraw.ImageDraw, name: str, x: int, y: int) -> None:
    """Draw ``name`` with its base at (x, y). Unknown names become a labelled grey box."""
    n = name.lower()
    if n == "table":
        d.rectangle([x - 150, y - 20, x + 150, y], fill=(139, 90, 43))
        d.rectangle([x - 140, y, x - 125, y + 60], fill=(110, 70, 35))
        d.rectangle([x + 125, y, x + 140, y + 60], fill=(110, 70, 35))
    elif n == "red mug":
        d.rectangle([x - 25, y - 60, x + 25, y], fill=(200, 20, 25), outline=(90, 0, 0), width=2)
        d.arc([x + 12, y - 50, x + 45, y - 15], -90, 90, fill=(200, 20, 25), width=7)
    elif n == "white bowl":
        d.chord([x - 50, y - 50, x + 50, y + 10], 0, 180, fill=(250, 250, 250), outline=(120,) * 3)
    elif n == "blue laptop":
        d.polygon(
            [(x - 70, y - 100), (x + 70, y - 100), (x + 60, y - 10), (x - 60, y - 10)],
            fill=(30, 70, 200),
            outline=(10, 30, 90),
        )
        d.rectangle([x - 85, y - 10, x + 85, y], fill=(40, 60, 150))
    elif n == "green plant":
        d.polygon(
            [(x - 30, y - 50), (x + 30, y - 50), (x + 22, y), (x - 22, y)], fill=(150, 80, 40)
        )
        for dx, dy, r in ((-25, -85, 28), (20, -95, 30), (0, -125, 30), (-5, -70, 22)):
            d.ellipse([x + dx - r, y + dy - r, x + dx + r, y + dy + r], fill=(30, 150, 50))
    elif n == "yellow keys":
        d.ellipse([x - 30, y - 30, x - 6, y - 6], outline=(230, 190, 0), width=6)
        d.rectangle([x - 8, y - 22, x + 35, y - 14], fill=(230, 190, 0))
        d.rectangle([x + 20, y - 14, x + 26, y - 6], fill=(230, 190, 0))
    elif n == "fridge":
        d.rectangle([x - 90, y - 250, x + 90, y], fill=(245, 245, 250), outline=(140,) * 3, width=3)
        d.line([x - 90, y - 170, x + 90, y - 170], fill=(140,) * 3, width=3)
        d.rectangle([x + 65, y - 230, x + 75, y - 185], fill=(150,) * 3)
    elif n.startswith("person "):
        label = name.split(" ", 1)[1].upper()
        d.ellipse([x - 28, y - 240, x + 28, y - 184], fill=(230, 190, 160))
        d.rectangle([x - 45, y - 180, x + 45, y - 50], fill=(150, 40, 120))
        d.rectangle([x - 38, y - 50, x - 8, y], fill=(50, 50, 70))
        d.rectangle([x + 8, y - 50, x + 38, y], fill=(50, 50, 70))
        d.rectangle([x - 40, y - 150, x + 40, y - 122], fill=(255, 255, 255))
        d.text((x, y - 136), label, fill=(0, 0, 0), font=_font(20), anchor="mm")
    elif n == "orange book":
        d.rectangle([x - 45, y - 25, x + 45, y], fill=(240, 130, 20), outline=(120, 60, 0), width=2)
    elif n == "black phone":
        d.rounded_rectangle([x - 20, y - 70, x + 20, y], radius=6, fill=(20, 20, 20))
    elif n == "milk carton":
        d.rectangle(
            [x - 30, y - 110, x + 30, y], fill=(250, 250, 250), outline=(60, 90, 200), width=3
        )
        d.text((x, y - 55), "MILK", fill=(40, 70, 200), font=_font(20), anchor="mm")
    elif n == "bananas":
        for k in range(3):
            d.arc(
                [x - 50, y - 60 + 8 * k, x + 50, y + 8 * k], 20, 160, fill=(250, 215, 40), width=10
            )
    elif n == "water bottle":
        d.rectangle(
            [x - 18, y - 110, x + 18, y], fill=(120, 190, 240), outline=(30, 90, 160), width=2
        )
        d.rectangle([x - 10, y - 125, x + 10, y - 110], fill=(30, 90, 160))
    elif n == "car":
        d.rounded_rectangle([x - 150, y - 80, x + 150, y - 20], radius=20, fill=(180, 30, 30))
        d.polygon(
            [(x - 90, y - 80), (x - 55, y - 130), (x + 60, y - 130), (x + 95, y - 80)],
            fill=(160, 25, 25),
        )
        for wx in (x - 90, x + 90):
            d.ellipse([wx - 28, y - 48, wx + 28, y + 8], fill=(25, 25, 25))
    else:
        d.rectangle([x - 50, y - 60, x + 50, y], fill=(160,) * 3, outline=(60,) * 3, width=2)
        d.text((x, y - 30), name[:12].upper(), fill=(0, 0, 0), font=_font(16), anchor="mm")


def render_scene(spec: SceneSpec, seed: int) -> Image.Image:
    """The scene's base image, a little larger than a frame so frames can be jittered crops."""
    w, h = FRAME_SIZE[0] + 2 * _JITTER, FRAME_SIZE[1] + 2 * _JITTER
    rng = random.Random(seed)
    bg = spec.background or _PLACE_COLORS.get(spec.sign.upper(), (220, 220, 220))
    img = Image.new("RGB", (w, h), bg)
    d = ImageDraw.Draw(img)
    floor_y = int(h * 0.72)
    d.rectangle([0, floor_y, w, h], fill=tuple(max(0, c - 50) for c in bg))
    # The sign: dark plate, large white capitals (OCR-readable).
    font = _font(48 if len(spec.sign) <= 12 else 36)
    box = d.textbbox((0, 0), spec.sign, font=font)
    tw, th = box[2] - box[0], box[3] - box[1]
    sx = rng.randint(20, max(20, w - tw - 60))
    d.rectangle([sx, 20, sx + tw + 40, 20 + th + 34], fill=(30, 40, 60))
    d.text((sx + 20, 20 + 17 - box[1]), spec.sign, fill=(255, 255, 255), font=font)
    # Large things stand on the floor; small ones sit on the table when there is one
    # (the table takes the left of the room, floor items the right).
    names = [n for n in spec.objects if n.lower() != "table"]
    small = [n for n in names if not _is_large(n)]
    floor_items, left, span = names, 0, w
    if small and "table" in (n.lower() for n in spec.objects):
        floor_items = [n for n in names if _is_large(n)]
        tx = w // 3 + rng.randint(-20, 20) if floor_items else w // 2 + rng.randint(-40, 40)
        _draw_object(d, "table", tx, floor_y + 60)
        for i, name in enumerate(small):
            _draw_object(d, name, tx - 110 + int((i + 0.5) * 220 / len(small)), floor_y + 40)
        left, span = int(w * 0.62), int(w * 0.36)
    for i, name in enumerate(floor_items):
        x = left + int((i + 0.5) * span / len(floor_items)) + rng.randint(-20, 20)
        _draw_object(d, name, x, floor_y + (60 if name.lower() == "car" else 10))
    # Sticky notes last, so nothing hides their text.
    for i, note in enumerate(spec.notes):
        nx, ny = w - 230 - 10 * i, 120 + 105 * i
        d.rectangle([nx, ny, nx + 210, ny + 90], fill=(255, 236, 90), outline=(200, 170, 0))
        d.text((nx + 105, ny + 45), note, fill=(20, 20, 20), font=_font(30), anchor="mm")
    return img


def _frame_jpeg(base: Image.Image, ts: datetime, rng: random.Random) -> bytes:
    dx, dy = rng.randint(0, 2 * _JITTER), rng.randint(0, 2 * _JITTER)
    frame = base.crop((dx, dy, dx + FRAME_SIZE[0], dy + FRAME_SIZE[1]))
    d = ImageDraw.Draw(frame)
    clock = ts.strftime("%H:%M:%S")
    d.rectangle(
        [FRAME_SIZE[0] - 130, FRAME_SIZE[1] - 36, FRAME_SIZE[0] - 6, FRAME_SIZE[1] - 6],
        fill=(0, 0, 0),
    )
    d.text(
        (FRAME_SIZE[0] - 68, FRAME_SIZE[1] - 21),
        clock,
        fill=(255, 255, 255),
        font=_font(22),
        anchor="mm",
    )
    buf = io.BytesIO()
    frame.save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


# --- speech --------------------------------------------------------------------------------


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


@functools.lru_cache(maxsize=256)
def speak(text: str, voice: str = "en-us", wpm: int = 150) -> np.ndarray:
    """``text`` spoken by espeak-ng, as int16 samples at 16 kHz mono (cached per process)."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise SyntheticError(
            "espeak-ng is not installed: `apt-get install -y espeak-ng` (make setup does it)"
        )
    with tempfile.NamedTemporaryFile(suffix=".wav") as tmp:
        proc = subprocess.run(
            [exe, "-v", voice, "-s", str(wpm), "-w", tmp.name, text],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise SyntheticError(f"espeak-ng failed ({proc.returncode}): {proc.stderr.decode()}")
        with wave.open(tmp.name, "rb") as w:
            rate = w.getframerate()
            samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    out = _resample(samples, rate, SAMPLE_RATE)
    out.setflags(write=False)
    return out


def _resample(samples: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Band-limited resampling (FFT); plenty for a few seconds of speech."""
    if src == dst or samples.size == 0:
        return samples.astype(np.int16)
    n_out = int(round(samples.size * dst / src))
    spectrum = np.fft.rfft(samples.astype(np.float64))
    keep = n_out // 2 + 1
    resized = np.zeros(keep, dtype=complex)
    m = min(keep, spectrum.size)
    resized[:m] = spectrum[:m]
    out = np.fft.irfft(resized, n=n_out) * (n_out / samples.size)
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


def write_wav(path: Path, samples: np.ndarray, rate: int = SAMPLE_RATE) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())


# --- session --------------------------------------------------------------------------------


def fit_script(script: list[SceneSpec], total_s: float, min_scene_s: float) -> list[SceneSpec]:
    """The first scenes of ``script`` that fit in ``total_s`` with at least ``min_scene_s``
    each (one at least), sharing the time equally."""
    if total_s <= 0:
        raise ValueError("the session needs a positive length")
    n = max(1, min(len(script), int(total_s // min_scene_s)))
    length = total_s / n
    return [s.model_copy(update={"duration_s": length}) for s in script[:n]]


def plan_scenes(
    script: list[SceneSpec], start: datetime, total_s: float, seed: int
) -> list[SceneTiming]:
    """Lay scenes end to end (cycling the script) until ``total_s`` is covered."""
    if not script:
        raise ValueError("script has no scenes")
    rng = random.Random(seed)
    out: list[SceneTiming] = []
    t = 0.0
    i = 0
    while t < total_s:
        spec = script[i % len(script)]
        length = spec.duration_s or rng.uniform(30.0, 60.0)
        end = min(total_s, t + length)
        out.append(
            SceneTiming(
                index=i,
                spec=spec,
                start=start + timedelta(seconds=t),
                end=start + timedelta(seconds=end),
            )
        )
        t, i = end, i + 1
    return out


def _place_speech(scenes: list[SceneTiming], session_end: datetime) -> None:
    """Give each scene's lines start/end times: from 2 s into the scene, 0.8 s apart."""
    for scene in scenes:
        cursor = scene.start + timedelta(seconds=2)
        for text in scene.spec.speech:
            length = timedelta(seconds=speak(text).size / SAMPLE_RATE)
            if cursor + length > min(scene.end, session_end):
                break  # a truncated last scene keeps only the lines that fit
            scene.spoken.append(SpokenLine(text=text, start=cursor, end=cursor + length))
            cursor += length + timedelta(milliseconds=800)


def generate_session(
    out_dir: Path | str,
    *,
    minutes: float,
    fps: float = 1.0,
    start: datetime,
    script: list[SceneSpec] | None = None,
    seed: int = 0,
    audio: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> SessionFiles:
    """Write ``frames/NNNNNN.jpg`` (``minutes*60*fps`` of them), ``audio.wav`` and
    ``session.json`` under ``out_dir``; return where they are and the scene timeline."""
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware")
    if minutes <= 0 or fps <= 0:
        raise ValueError("minutes and fps must be positive")
    out = Path(out_dir)
    frames_dir = out / "frames"
    frames_dir.mkdir(parents=True, exist_ok=True)
    total_s = minutes * 60.0
    n_frames = int(round(total_s * fps))
    scenes = plan_scenes(script or DEFAULT_SCRIPT, start, total_s, seed)
    session_end = start + timedelta(seconds=total_s)

    if audio:
        lines = {t for s in scenes for t in s.spec.speech}
        # espeak-ng is a subprocess: synthesise the distinct lines concurrently.
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(speak, sorted(lines)))
        _place_speech(scenes, session_end)

    bases: dict[int, Image.Image] = {}
    rng = random.Random(seed + 1)
    scene_idx = 0
    for i in range(n_frames):
        ts = start + timedelta(seconds=i / fps)
        while scene_idx + 1 < len(scenes) and ts >= scenes[scene_idx].end:
            scene_idx += 1
        scene = scenes[scene_idx]
        # Identical specs share one rendering (seeded by the spec's place in the script).
        cache_key = id(scene.spec)
        if cache_key not in bases:
            bases[cache_key] = render_scene(scene.spec, seed * 1000 + scene.index)
        (frames_dir / f"{i:06d}.jpg").write_bytes(_frame_jpeg(bases[cache_key], ts, rng))
        if progress is not None:
            progress(i + 1, n_frames)

    wav_path: Path | None = None
    if audio:
        track = np.zeros(int(round(total_s * SAMPLE_RATE)), dtype=np.int16)
        for scene in scenes:
            for line in scene.spoken:
                samples = speak(line.text)
                at = int(round((line.start - start).total_seconds() * SAMPLE_RATE))
                n = min(samples.size, track.size - at)
                track[at : at + n] = samples[:n]
        wav_path = out / "audio.wav"
        write_wav(wav_path, track)

    files = SessionFiles(
        frames_dir=frames_dir,
        audio_wav=wav_path,
        scenes=scenes,
        start=start,
        fps=fps,
        n_frames=n_frames,
        duration_s=total_s,
        manifest=out / "session.json",
    )
    files.manifest.write_text(json.dumps(files.model_dump(mode="json"), indent=2))
    return files
