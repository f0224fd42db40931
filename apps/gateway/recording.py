"""A recording (a video file, or a directory of images, plus an optional audio file) read
into the captures a device would have sent: frames with their capture times, audio chunks,
and the plan of the session, every input checked before anything is sent."""

from __future__ import annotations

import io
import itertools
import wave
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from connectors import codec

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
DEFAULT_CHUNK_S = 5.0


class GatewayInputError(ValueError):
    """An input file cannot be read; the message names it."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        super().__init__(f"cannot read {path}: {reason}")


def prepare_jpeg(image: Image.Image | bytes, max_side: int, quality: int = 85) -> bytes:
    """JPEG bytes no larger than ``max_side`` px; a small-enough JPEG passes unchanged."""
    if isinstance(image, bytes | bytearray):
        with Image.open(io.BytesIO(image)) as probe:
            if probe.format == "JPEG" and max(probe.size) <= max_side:
                return bytes(image)
            img = probe.convert("RGB")
    else:
        img = image.convert("RGB")
    if max(img.size) > max_side:
        img.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


@dataclass(frozen=True)
class FrameItem:
    ts: datetime
    seq: int
    jpeg: bytes


@dataclass(frozen=True)
class AudioItem:
    ts: datetime
    duration_ms: int
    wav: bytes


def list_frame_files(frames_dir: Path) -> list[Path]:
    """Image files of ``frames_dir`` in name order, each checked to open as an image."""
    if not frames_dir.is_dir():
        raise GatewayInputError(frames_dir, "not a directory")
    files = sorted(p for p in frames_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise GatewayInputError(frames_dir, f"no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
    for path in files:  # header-only check: cheap, and fails before anything is sent
        try:
            with Image.open(path) as img:
                img.size  # noqa: B018
        except (UnidentifiedImageError, OSError) as exc:
            raise GatewayInputError(path, f"not a readable image ({exc})") from None
    return files


def frames_from_dir(
    files: list[Path], *, fps: float, start: datetime, max_side: int
) -> Iterator[FrameItem]:
    step = timedelta(seconds=1 / fps)
    for seq, path in enumerate(files):
        try:
            jpeg = prepare_jpeg(path.read_bytes(), max_side)
        except (UnidentifiedImageError, OSError) as exc:
            raise GatewayInputError(path, f"not a readable image ({exc})") from None
        yield FrameItem(ts=start + seq * step, seq=seq, jpeg=jpeg)


def _open_av(path: Path) -> Any:
    import av

    try:
        return av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise GatewayInputError(path, f"not a readable media file ({exc})") from None


def video_duration_s(path: Path) -> float:
    with _open_av(path) as container:
        if not container.streams.video:
            raise GatewayInputError(path, "no video stream")
        stream = container.streams.video[0]
        if stream.duration is not None and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
        if container.duration is not None:
            return container.duration / 1_000_000
        return 0.0


def frames_from_video(
    path: Path, *, fps: float, start: datetime, max_side: int
) -> Iterator[FrameItem]:
    """Frames sampled at ``fps``; each keeps its own presentation time as capture offset."""
    import av

    with _open_av(path) as container:
        if not container.streams.video:
            raise GatewayInputError(path, "no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        rate = float(stream.average_rate or 30)
        next_t, first_t, seq = 0.0, None, 0
        try:
            for index, frame in enumerate(container.decode(stream)):
                t = frame.time if frame.time is not None else index / rate
                first_t = t if first_t is None else first_t
                t -= first_t
                if t + 1e-6 < next_t:
                    continue
                yield FrameItem(
                    ts=start + timedelta(seconds=t),
                    seq=seq,
                    jpeg=prepare_jpeg(frame.to_image(), max_side),
                )
                seq += 1
                while next_t <= t + 1e-6:
                    next_t += 1 / fps
        except av.error.FFmpegError as exc:
            raise GatewayInputError(path, f"video decoding failed ({exc})") from None


def load_audio(path: Path) -> tuple[np.ndarray, int]:
    """Mono int16 samples and their rate: PCM16 WAV read directly, anything else via PyAV
    (resampled to 16 kHz mono)."""
    if not path.is_file():
        raise GatewayInputError(path, "no such file")
    try:
        with wave.open(str(path), "rb") as w:
            if w.getsampwidth() == 2 and w.getcomptype() == "NONE":
                rate, channels = w.getframerate(), w.getnchannels()
                raw = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
                if channels > 1:
                    raw = raw.reshape(-1, channels).mean(axis=1).astype(np.int16)
                return raw, rate
    except (wave.Error, EOFError):
        pass  # not a PCM16 WAV: let PyAV try
    return _decode_audio_av(path)


def _decode_audio_av(path: Path, rate: int = 16_000) -> tuple[np.ndarray, int]:
    import av

    with _open_av(path) as container:
        if not container.streams.audio:
            raise GatewayInputError(path, "no audio stream")
        resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        parts: list[np.ndarray] = []
        try:
            for frame in container.decode(container.streams.audio[0]):
                for out in resampler.resample(frame):
                    parts.append(out.to_ndarray().reshape(-1))
            for out in resampler.resample(None):
                parts.append(out.to_ndarray().reshape(-1))
        except av.error.FFmpegError as exc:
            raise GatewayInputError(path, f"audio decoding failed ({exc})") from None
    if not parts:
        raise GatewayInputError(path, "the audio stream is empty")
    return np.concatenate(parts).astype(np.int16), rate


def has_audio_stream(path: Path) -> bool:
    with _open_av(path) as container:
        return bool(container.streams.audio)


def audio_chunks(
    samples: np.ndarray, rate: int, *, start: datetime, chunk_s: float = DEFAULT_CHUNK_S
) -> Iterator[AudioItem]:
    """Consecutive WAV chunks of ``chunk_s`` (the last may be shorter)."""
    size = max(1, int(round(chunk_s * rate)))
    for offset in range(0, samples.size, size):
        part = samples[offset : offset + size]
        yield AudioItem(
            ts=start + timedelta(seconds=offset / rate),
            duration_ms=max(1, round(1000 * part.size / rate)),
            wav=codec.wav_bytes(part.astype("<i2").tobytes(), rate),
        )


def default_start(duration_s: float, realtime: bool, now: datetime | None = None) -> datetime:
    """Realtime replays start now; fast replays end now, so capture times stay within the
    flow's future-skew limit."""
    now = now or datetime.now(UTC)
    return now if realtime else now - timedelta(seconds=duration_s)


@dataclass
class GatewayPlan:
    """What a recording turns into; built (and every input checked) before anything is sent."""

    start: datetime
    duration_s: float
    frames: Iterable[FrameItem]
    audio: Iterable[AudioItem]
    n_frames: int  # exact for a frame directory, estimated for a video
    n_audio_chunks: int


def plan_recording(
    *,
    video: Path | None = None,
    frames_dir: Path | None = None,
    audio: Path | None = None,
    fps: float = 1.0,
    start: datetime | None = None,
    realtime: bool = False,
    max_side: int = 1280,
    chunk_s: float = DEFAULT_CHUNK_S,
) -> GatewayPlan:
    """Check the inputs and lay out the session; GatewayInputError names a bad file."""
    if (video is None) == (frames_dir is None):
        raise ValueError("give exactly one of a video or a frames directory")
    if fps <= 0 or chunk_s <= 0:
        raise ValueError("fps and the audio chunk length must be positive")
    if start is not None and start.tzinfo is None:
        raise ValueError("start must be timezone-aware")

    files: list[Path] = []
    if frames_dir is not None:
        files = list_frame_files(frames_dir)
        visual_s, n_frames = len(files) / fps, len(files)
    else:
        assert video is not None
        if not video.is_file():
            raise GatewayInputError(video, "no such file")
        visual_s = video_duration_s(video)
        n_frames = max(1, int(visual_s * fps))

    samples, rate = None, 0
    if audio is not None:
        samples, rate = load_audio(audio)
    elif video is not None and has_audio_stream(video):
        samples, rate = load_audio(video)
    audio_s = samples.size / rate if samples is not None else 0.0
    duration_s = max(visual_s, audio_s)
    t0 = start or default_start(duration_s, realtime)

    if frames_dir is not None:
        frame_iter: Iterable[FrameItem] = frames_from_dir(
            files, fps=fps, start=t0, max_side=max_side
        )
    else:
        # Decode the first frame now: a broken video fails before anything is sent.
        frame_iter = frames_from_video(video, fps=fps, start=t0, max_side=max_side)  # type: ignore[arg-type]
        first = next(iter(frame_iter), None)
        if first is None:
            raise GatewayInputError(video, "the video has no decodable frames")  # type: ignore[arg-type]
        frame_iter = itertools.chain([first], frame_iter)
    audio_iter: Iterable[AudioItem] = ()
    n_chunks = 0
    if samples is not None and samples.size:
        audio_iter = audio_chunks(samples, rate, start=t0, chunk_s=chunk_s)
        n_chunks = -(-samples.size // max(1, int(round(chunk_s * rate))))
    return GatewayPlan(
        start=t0,
        duration_s=duration_s,
        frames=frame_iter,
        audio=audio_iter,
        n_frames=n_frames,
        n_audio_chunks=n_chunks,
    )
