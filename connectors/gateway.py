"""The glasses gateway: turns a recording (a video file, or a directory of images, plus an
optional audio file) into the ``frames``/``audio``/``control`` messages a device would send,
and a small producer API (:class:`GlassesProducer`) for a real device gateway.

Message order follows when a device would have each item: a frame at its capture time, an
audio chunk when it has been fully recorded (start + duration). ``session_start`` comes
first and ``session_end`` last. Without ``realtime`` everything goes as fast as the broker
takes it; with ``realtime`` sending is paced by capture time.
"""

from __future__ import annotations

import heapq
import io
import itertools
import time
import wave
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image, UnidentifiedImageError

from connectors import codec, kafka_io

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
DEFAULT_CHUNK_S = 5.0
DEFAULT_TOPICS = {k: f"worldmm.{k}" for k in ("frames", "audio", "control", "dlq")}


class GatewayInputError(ValueError):
    """An input file cannot be read; the message names it."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        super().__init__(f"cannot read {path}: {reason}")


class BrokerUnavailable(RuntimeError):
    """The broker cannot be reached or a topic is missing."""


# --- producer API ----------------------------------------------------------------------------


class GlassesProducer:
    """Send one wearer's frames, audio and session events (the device-side API).

    >>> p = GlassesProducer("127.0.0.1:9092")                      # doctest: +SKIP
    >>> p.send_frame("alice", "s1", datetime.now(UTC), jpeg, seq=0)  # doctest: +SKIP
    >>> p.flush()                                                   # doctest: +SKIP
    """

    def __init__(
        self,
        target: Any,
        topics: Mapping[str, str] | None = None,
        *,
        producer: Any = None,
        **conf: Any,
    ) -> None:
        if isinstance(target, str):
            brokers = target
            topics = dict(topics or DEFAULT_TOPICS)
        else:  # Settings
            from connectors.topics import topic_names

            if not target.kafka_brokers:
                raise BrokerUnavailable("settings.kafka_brokers is not set")
            brokers = target.kafka_brokers
            topics = dict(topics or topic_names(target))
        self.brokers = brokers
        self.topics = topics
        conf.setdefault("message_timeout_ms", 60_000)
        self.producer = producer or kafka_io.make_producer(brokers, **conf)
        self.tracker = kafka_io.DeliveryTracker()
        self.sent: dict[str, int] = {"frames": 0, "audio": 0, "control": 0}

    def check(self, timeout: float = 10.0) -> None:
        """Raise BrokerUnavailable unless the broker answers and our topics exist."""
        from confluent_kafka import KafkaException

        try:
            meta = self.producer.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise BrokerUnavailable(f"Kafka at {self.brokers} does not answer: {exc}") from None
        missing = [self.topics[k] for k in self.sent if self.topics[k] not in meta.topics]
        if missing:
            names = ", ".join(missing)
            hint = "run `worldmm topics create`"
            raise BrokerUnavailable(f"topic(s) {names} missing on {self.brokers}: {hint}")

    def _send(self, kind: Literal["frames", "audio", "control"], record: codec.Record) -> None:
        key, value, headers = record
        kafka_io.produce(
            self.producer, self.topics[kind], key, value, headers, on_delivery=self.tracker
        )
        self.sent[kind] += 1

    def send_frame(self, user: str, session: str, ts: datetime, jpeg: bytes, seq: int) -> None:
        codec.check_jpeg(jpeg)  # a bad frame is the sender's bug: fail here, not in the flow
        self._send("frames", codec.encode_frame(user, session, ts, seq, jpeg))

    def send_audio(
        self,
        user: str,
        session: str,
        ts: datetime,
        data: bytes,
        *,
        duration_ms: int | None = None,
        sample_rate: int | None = None,
        content_type: Literal["audio/wav", "audio/pcm"] = codec.WAV,
    ) -> None:
        if content_type == codec.WAV:
            rate, channels, n = codec.wav_info(data)
            sample_rate = sample_rate or rate
            duration_ms = duration_ms or max(1, round(1000 * n / rate))
        elif sample_rate is None:
            raise ValueError("audio/pcm needs sample_rate")
        else:
            duration_ms = duration_ms or max(1, round(1000 * (len(data) // 2) / sample_rate))
        self._send(
            "audio",
            codec.encode_audio(
                user,
                session,
                ts,
                data,
                duration_ms=duration_ms,
                sample_rate=sample_rate,
                content_type=content_type,
            ),
        )

    def start_session(self, user: str, session: str, ts: datetime) -> None:
        self._send("control", codec.encode_control(user, session, ts, "session_start"))

    def end_session(
        self,
        user: str,
        session: str,
        ts: datetime,
        last_ms: dict[codec.StreamKind, int] | None = None,
    ) -> None:
        """Tell the flow the session is over: it flushes the user's open windows once it has
        seen each stream up to ``last_ms`` (kind → end of its last capture, epoch ms)."""
        msg = codec.encode_control(user, session, ts, "session_end", last_ms or None)
        self._send("control", msg)

    def pause(self, user: str, session: str, ts: datetime, *, resume: bool = False) -> None:
        """A privacy pause (or its end) at ``ts``: the flow drops every capture between a pause
        and its resume, or the session's end, unstored."""
        event: codec.ControlEvent = "resume" if resume else "pause"
        self._send("control", codec.encode_control(user, session, ts, event))

    def flush(self, timeout: float = 60.0) -> None:
        """Wait for every acknowledgement; DeliveryError if any message was lost."""
        kafka_io.flush(self.producer, self.tracker, timeout)

    def __enter__(self) -> GlassesProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.flush()


# --- inputs ----------------------------------------------------------------------------------


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


# --- the send loop ---------------------------------------------------------------------------


@dataclass
class GatewayStats:
    frames: int = 0
    audio_chunks: int = 0
    control: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    wall_s: float = 0.0
    bytes_sent: int = 0


def _available_at(item: FrameItem | AudioItem) -> datetime:
    if isinstance(item, AudioItem):
        return item.ts + timedelta(milliseconds=item.duration_ms)
    return item.ts


def run_gateway(
    producer: GlassesProducer,
    *,
    user: str,
    session: str,
    start: datetime,
    frames: Iterable[FrameItem],
    audio: Iterable[AudioItem] = (),
    realtime: bool = False,
    on_item: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    flush_timeout: float = 60.0,
    pauses: Iterable[tuple[datetime, bool]] = (),
) -> GatewayStats:
    """Send session_start, the frames and audio chunks merged by availability time, then
    session_end; wait for all acks. ``realtime`` paces sends by capture time. ``pauses``
    ((time, is_resume) pairs) go as pause/resume control records at their time; captures
    in a paused span are still sent (the flow drops them: that is what a pause guarantees)."""
    stats = GatewayStats()
    t0 = clock()

    def pace(at: datetime) -> None:
        if realtime:
            delay = (at - start).total_seconds() - (clock() - t0)
            if delay > 0:
                sleep(delay)

    producer.start_session(user, session, start)
    stats.control += 1
    end = start
    last_ms: dict[codec.StreamKind, int] = {}  # per stream, where its last sent capture ends
    merged = heapq.merge(
        ((_available_at(f), 0, i, f) for i, f in enumerate(frames)),
        ((_available_at(a), 1, i, a) for i, a in enumerate(audio)),
        ((at, 2, i, resume) for i, (at, resume) in enumerate(sorted(pauses))),
    )
    try:
        for at, _kind, _i, item in merged:
            pace(at)
            kind: codec.StreamKind
            if isinstance(item, bool):
                producer.pause(user, session, at, resume=item)
                stats.control += 1
                continue
            if isinstance(item, FrameItem):
                producer.send_frame(user, session, item.ts, item.jpeg, item.seq)
                stats.frames += 1
                stats.bytes_sent += len(item.jpeg)
                kind = "frames"
            else:
                producer.send_audio(user, session, item.ts, item.wav, duration_ms=item.duration_ms)
                stats.audio_chunks += 1
                stats.bytes_sent += len(item.wav)
                kind = "audio"
            stats.first_ts = item.ts if stats.first_ts is None else min(stats.first_ts, item.ts)
            stats.last_ts = item.ts if stats.last_ts is None else max(stats.last_ts, item.ts)
            end = max(end, at)
            last_ms[kind] = max(last_ms.get(kind, 0), codec.to_epoch_ms(at))
            if on_item is not None:
                on_item(kind)
    except (GatewayInputError, KeyboardInterrupt):
        # The input broke (or the user stopped us) midway: what was sent is valid, so close
        # the session where it stopped (the flow then flushes those windows), then re-raise.
        producer.end_session(user, session, end, last_ms)
        producer.flush(flush_timeout)
        raise
    producer.end_session(user, session, end, last_ms)
    stats.control += 1
    producer.flush(flush_timeout)
    stats.wall_s = clock() - t0
    return stats


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
