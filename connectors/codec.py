"""Message codecs for the ingest topics (DESIGN.md §3), and their validation.

Pure: no Kafka import. ``decode`` turns one raw Kafka record (key, value, headers) into a
typed message or raises :class:`InvalidMessage` whose ``reason`` is a short stable code the
DLQ records; ``encode_*`` is the inverse and is what the gateway sends.

Header values are UTF-8 text; ``ts`` is the capture time in epoch milliseconds. A control
message's value is JSON: ``{"event": "session_start"}``, ``{"event": "pause"}``,
``{"event": "resume"}`` or ``{"event": "session_end", "last_ms": {"frames": ms, "audio": ms}}``
(a pause and a resume take effect at their ``ts``). ``last_ms`` is optional but recommended: it says
where each stream's last capture ends, so the flow closes the session once that data has
arrived rather than after a wall-clock grace.
"""

from __future__ import annotations

import io
import json
import re
import wave
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
)

from worldmm.media.jpeg import DECODE_CEILING_PIXELS, JpegError, frame_size
from worldmm.models import SAFE_ID_RE, from_epoch_ms, to_epoch_ms

TopicKind = Literal["frames", "audio", "control"]
StreamKind = Literal["frames", "audio"]  # the capture streams a session end reports on
ControlEvent = Literal["session_start", "session_end", "pause", "resume"]
CONTROL_EVENTS: tuple[str, ...] = ("session_start", "session_end", "pause", "resume")
Headers = list[tuple[str, bytes]]
Record = tuple[bytes, bytes, Headers]

JPEG = "image/jpeg"
WAV = "audio/wav"
PCM16 = "audio/pcm"  # raw little-endian signed 16-bit mono; needs the sample_rate header
CONTROL_JSON = "application/json"
AUDIO_CODECS = (WAV, PCM16)
_AUDIO_ALIASES = {"audio/wave": WAV, "audio/x-wav": WAV, "audio/l16": PCM16}

# Stable reason codes (the DLQ ``reason`` header starts with one of these).
MISSING_KEY = "missing_key"
KEY_MISMATCH = "key_mismatch"
MISSING_HEADER = "missing_header"
INVALID_HEADER = "invalid_header"
INVALID_ID = "invalid_id"
EMPTY_PAYLOAD = "empty_payload"
PAYLOAD_TOO_LARGE = "payload_too_large"
UNSUPPORTED_CONTENT_TYPE = "unsupported_content_type"
BAD_JPEG = "bad_jpeg"
FRAME_TOO_LARGE = "frame_too_large"
UNSUPPORTED_AUDIO = "unsupported_audio_codec"
BAD_AUDIO = "bad_audio"
AUDIO_TOO_LONG = "audio_too_long"
DURATION_MISMATCH = "duration_mismatch"
BAD_CONTROL = "bad_control"
TS_IN_FUTURE = "ts_in_future"
TS_TOO_OLD = "ts_too_old"
UNKNOWN_TOPIC = "unknown_topic"
UNKNOWN_USER = "unknown_user"  # the flow's user check, not decode: a user the API does not know

BIGINT_MAX = 2**63 - 1  # what the database's bigint columns hold (seq)


class InvalidMessage(ValueError):
    """A record that cannot be processed. ``reason`` is a stable code, ``detail`` says why."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class CodecLimits(BaseModel):
    """What ``decode`` accepts; built from settings by :meth:`from_settings`."""

    model_config = ConfigDict(frozen=True)

    max_future_skew_s: float = Field(default=300.0, ge=0)
    max_past_age_s: float = Field(default=30 * 24 * 3600.0, ge=0)
    max_payload_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    max_frame_pixels: int = Field(default=24_000_000, ge=1, le=DECODE_CEILING_PIXELS)
    max_audio_chunk_ms: int = Field(default=120_000, ge=1)
    audio_duration_tolerance_ms: int = Field(default=100, ge=0)

    @classmethod
    def from_settings(cls, settings: object) -> CodecLimits:
        return cls(**{name: getattr(settings, name) for name in cls.model_fields})


def _check_id(value: str) -> str:
    if not SAFE_ID_RE.fullmatch(value) or value in {".", ".."}:
        raise ValueError(f"{value!r} must match {SAFE_ID_RE.pattern} (and not be '.' or '..')")
    return value


class _Base(BaseModel):
    model_config = ConfigDict(frozen=True)

    user_id: str
    session_id: str
    ts: AwareDatetime

    @field_validator("user_id", "session_id")
    @classmethod
    def _safe_id(cls, v: str) -> str:
        return _check_id(v)

    @field_validator("ts")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        # Headers carry milliseconds; truncating here makes encode/decode an exact round trip.
        v = v.astimezone(UTC)
        return v.replace(microsecond=v.microsecond // 1000 * 1000)

    @property
    def ts_ms(self) -> int:
        return to_epoch_ms(self.ts)


class FrameMessage(_Base):
    kind: Literal["frames"] = "frames"
    seq: int = Field(ge=0, le=BIGINT_MAX)
    content_type: Literal["image/jpeg"] = JPEG
    jpeg: bytes


class AudioMessage(_Base):
    """An audio chunk starting at ``ts``. ``data`` is as sent (WAV file or raw PCM16 mono)."""

    kind: Literal["audio"] = "audio"
    duration_ms: int = Field(gt=0)
    sample_rate: int = Field(ge=1000, le=384_000)
    content_type: Literal["audio/wav", "audio/pcm"] = WAV
    data: bytes

    @property
    def end(self) -> datetime:
        return self.ts + timedelta(milliseconds=self.duration_ms)


class ControlMessage(_Base):
    """Session start/end, or a privacy pause/resume (every capture of the user between a
    pause and its resume, or the session's end, is dropped unstored). A session end may say
    where each stream's last capture ended (``last_ms``: kind → epoch ms; frames: their ts,
    audio: start + duration), so the flow can tell when it has seen the whole session,
    whatever order the topics are read in."""

    kind: Literal["control"] = "control"
    event: ControlEvent
    last_ms: dict[StreamKind, StrictInt] | None = None

    @field_validator("last_ms")
    @classmethod
    def _last_ms(cls, v: dict[str, int] | None) -> dict[str, int] | None:
        if v is not None and any(ms < 0 for ms in v.values()):
            raise ValueError("last_ms values must be epoch milliseconds ≥ 0")
        return v


Message = FrameMessage | AudioMessage | ControlMessage


# --- time --------------------------------------------------------------------------------


# --- encode ------------------------------------------------------------------------------


def _h(pairs: Iterable[tuple[str, object]]) -> Headers:
    return [(name, str(value).encode()) for name, value in pairs]


def encode(msg: Message) -> Record:
    """(key, value, headers) for one message; the key is the user id (partitioning)."""
    common = [("user_id", msg.user_id), ("session_id", msg.session_id), ("ts", msg.ts_ms)]
    if isinstance(msg, FrameMessage):
        headers = _h([*common, ("seq", msg.seq), ("content_type", msg.content_type)])
        value = msg.jpeg
    elif isinstance(msg, AudioMessage):
        headers = _h(
            [
                *common,
                ("duration_ms", msg.duration_ms),
                ("sample_rate", msg.sample_rate),
                ("content_type", msg.content_type),
            ]
        )
        value = msg.data
    else:
        headers = _h([*common, ("content_type", CONTROL_JSON)])
        body: dict[str, object] = {"event": msg.event}
        if msg.last_ms:
            body["last_ms"] = msg.last_ms
        value = json.dumps(body, separators=(",", ":")).encode()
    return msg.user_id.encode(), value, headers


def encode_frame(user_id: str, session_id: str, ts: datetime, seq: int, jpeg: bytes) -> Record:
    return encode(FrameMessage(user_id=user_id, session_id=session_id, ts=ts, seq=seq, jpeg=jpeg))


def encode_audio(
    user_id: str,
    session_id: str,
    ts: datetime,
    data: bytes,
    *,
    duration_ms: int,
    sample_rate: int,
    content_type: Literal["audio/wav", "audio/pcm"] = WAV,
) -> Record:
    return encode(
        AudioMessage(
            user_id=user_id,
            session_id=session_id,
            ts=ts,
            duration_ms=duration_ms,
            sample_rate=sample_rate,
            content_type=content_type,
            data=data,
        )
    )


def encode_control(
    user_id: str,
    session_id: str,
    ts: datetime,
    event: ControlEvent,
    last_ms: dict[StreamKind, int] | None = None,
) -> Record:
    return encode(
        ControlMessage(user_id=user_id, session_id=session_id, ts=ts, event=event, last_ms=last_ms)
    )


# --- decode ------------------------------------------------------------------------------


def header_dict(headers: Sequence[tuple[str, bytes | str | None]] | None) -> dict[str, str]:
    """Headers as text; a header repeated with different values is invalid."""
    out: dict[str, str] = {}
    for name, raw in headers or []:
        if raw is None:
            continue
        try:
            text = raw.decode() if isinstance(raw, bytes | bytearray) else str(raw)
        except UnicodeDecodeError:
            raise InvalidMessage(INVALID_HEADER, f"header {name!r} is not UTF-8") from None
        if name in out and out[name] != text:
            raise InvalidMessage(INVALID_HEADER, f"header {name!r} repeated with other values")
        out[name] = text
    return out


def _need(h: dict[str, str], name: str) -> str:
    value = h.get(name)
    if value is None or value == "":
        raise InvalidMessage(MISSING_HEADER, f"header {name!r} is missing")
    return value


def _int(h: dict[str, str], name: str, *, required: bool = True) -> int | None:
    text = _need(h, name) if required else h.get(name)
    if text is None or text == "":
        return None
    if not re.fullmatch(r"-?\d{1,19}", text.strip()):
        raise InvalidMessage(INVALID_HEADER, f"header {name!r} is not an integer: {text[:40]!r}")
    return int(text)


def _id(h: dict[str, str], name: str) -> str:
    value = _need(h, name)
    try:
        return _check_id(value)
    except ValueError as exc:
        raise InvalidMessage(INVALID_ID, f"header {name}: {exc}") from None


def _check_time(ts_ms: int, now: datetime, limits: CodecLimits) -> datetime:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    try:
        ts = from_epoch_ms(ts_ms)
    except (OverflowError, OSError, ValueError):
        raise InvalidMessage(INVALID_HEADER, f"ts {ts_ms} is not a usable epoch-ms time") from None
    ahead = (ts - now).total_seconds()
    if ahead > limits.max_future_skew_s:
        raise InvalidMessage(
            TS_IN_FUTURE, f"ts {ts.isoformat()} is {ahead:.0f}s ahead of now ({now.isoformat()})"
        )
    if -ahead > limits.max_past_age_s:
        raise InvalidMessage(
            TS_TOO_OLD,
            f"ts {ts.isoformat()} is {-ahead:.0f}s old (limit {limits.max_past_age_s:.0f}s)",
        )
    return ts


def check_jpeg(data: bytes, max_pixels: int | None = None) -> tuple[int, int]:
    """The frame's (width, height), or InvalidMessage: ``bad_jpeg`` unless ``data`` is a
    structurally valid JPEG (worldmm.media.jpeg), ``frame_too_large`` when its header
    declares more than ``max_pixels`` (checked before anything decodes it)."""
    try:
        width, height = frame_size(data)
    except JpegError as exc:
        text = str(exc)
        raise InvalidMessage(
            BAD_JPEG, text if text.startswith("payload is") else f"undecodable JPEG: {text}"
        ) from None
    if max_pixels is not None and width * height > max_pixels:
        raise InvalidMessage(
            FRAME_TOO_LARGE, f"frame declares {width}x{height} pixels (limit {max_pixels})"
        )
    return width, height


def wav_info(data: bytes) -> tuple[int, int, int]:
    """(sample_rate, channels, n_frames) of a PCM16 WAV; InvalidMessage otherwise. The frames
    are those the payload holds, not what its header declares (a header may claim more)."""
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            n = len(w.readframes(w.getnframes())) // max(1, channels * width)
    except (wave.Error, EOFError) as exc:
        raise InvalidMessage(BAD_AUDIO, f"not a readable WAV file: {exc}") from None
    if width != 2:
        raise InvalidMessage(UNSUPPORTED_AUDIO, f"WAV sample width {8 * width} bit; need 16")
    if n == 0:
        raise InvalidMessage(BAD_AUDIO, "WAV holds no samples")
    if rate <= 0:
        raise InvalidMessage(BAD_AUDIO, f"WAV sample rate {rate}")
    return rate, channels, n


def _decode_audio(h: dict[str, str], value: bytes, base: dict, limits: CodecLimits) -> AudioMessage:
    ctype = _need(h, "content_type").strip().lower()
    ctype = _AUDIO_ALIASES.get(ctype, ctype)
    if ctype not in AUDIO_CODECS:
        raise InvalidMessage(UNSUPPORTED_AUDIO, f"content_type {ctype!r}; accepted {AUDIO_CODECS}")
    rate_hdr = _int(h, "sample_rate", required=ctype == PCM16)
    dur_hdr = _int(h, "duration_ms", required=False)
    if ctype == WAV:
        rate, _channels, n = wav_info(value)
        if rate_hdr is not None and rate_hdr != rate:
            raise InvalidMessage(INVALID_HEADER, f"sample_rate header {rate_hdr} ≠ WAV's {rate}")
    else:
        rate = rate_hdr or 0
        if rate <= 0:
            raise InvalidMessage(INVALID_HEADER, f"sample_rate {rate} must be positive")
        if len(value) % 2:
            raise InvalidMessage(BAD_AUDIO, "PCM16 payload has an odd number of bytes")
        n = len(value) // 2
    # The payload says how long the chunk is; a header may only agree with it. Believed, a
    # 2-byte chunk claiming 2,000,000,000 ms opened 66,666 windows nobody recorded.
    held_ms = 1000 * n / rate
    if held_ms > limits.max_audio_chunk_ms:
        raise InvalidMessage(
            AUDIO_TOO_LONG, f"chunk holds {held_ms:.0f} ms (limit {limits.max_audio_chunk_ms} ms)"
        )
    duration_ms = max(1, round(held_ms))
    if dur_hdr is not None:
        if abs(dur_hdr - held_ms) > limits.audio_duration_tolerance_ms:
            raise InvalidMessage(
                DURATION_MISMATCH,
                f"duration_ms header {dur_hdr} but the payload holds {held_ms:.0f} ms "
                f"(tolerance {limits.audio_duration_tolerance_ms} ms)",
            )
        duration_ms = dur_hdr
    try:
        return AudioMessage(
            **base, duration_ms=duration_ms, sample_rate=rate, content_type=ctype, data=value
        )
    except ValidationError as exc:
        raise InvalidMessage(INVALID_HEADER, _first_error(exc)) from None


def _decode_control(value: bytes, base: dict, now: datetime, limits: CodecLimits) -> ControlMessage:
    try:
        body = json.loads(value)
        event = body["event"]
    except (ValueError, TypeError, KeyError) as exc:
        detail = f"control value is not {{'event': ...}} JSON: {exc}"
        raise InvalidMessage(BAD_CONTROL, detail) from None
    if event not in CONTROL_EVENTS:
        raise InvalidMessage(BAD_CONTROL, f"unknown control event {event!r}")
    last_ms = body.get("last_ms")
    if last_ms is not None and event != "session_end":
        raise InvalidMessage(BAD_CONTROL, "last_ms belongs to a session_end only")
    if isinstance(last_ms, dict):  # the ends of captures: bounded like capture times
        for kind, ms in last_ms.items():
            if isinstance(ms, int) and not isinstance(ms, bool):
                try:
                    _check_time(ms, now, limits)
                except InvalidMessage as exc:
                    raise InvalidMessage(BAD_CONTROL, f"last_ms.{kind}: {exc.detail}") from None
    try:
        return ControlMessage(**base, event=event, last_ms=last_ms)
    except ValidationError as exc:
        raise InvalidMessage(BAD_CONTROL, _first_error(exc)) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}"


def decode(
    topic_kind: TopicKind,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | str | None]] | None,
    *,
    now: datetime,
    limits: CodecLimits,
) -> Message:
    """Validate one record and return the typed message; raise InvalidMessage otherwise."""
    if topic_kind not in ("frames", "audio", "control"):
        raise InvalidMessage(UNKNOWN_TOPIC, f"no codec for topic kind {topic_kind!r}")
    if not value:
        raise InvalidMessage(EMPTY_PAYLOAD, "the message has no value")
    if len(value) > limits.max_payload_bytes:
        raise InvalidMessage(
            PAYLOAD_TOO_LARGE, f"{len(value)} bytes > limit {limits.max_payload_bytes}"
        )
    h = header_dict(headers)
    user_id = _id(h, "user_id")
    session_id = _id(h, "session_id")
    if key is None or key == b"":
        raise InvalidMessage(MISSING_KEY, "the message has no key (must be the user id)")
    if key != user_id.encode():
        shown = key[:64].decode(errors="replace")
        raise InvalidMessage(KEY_MISMATCH, f"key {shown!r} ≠ user_id header {user_id!r}")
    ts = _check_time(_int(h, "ts"), now, limits)  # type: ignore[arg-type]
    base = {"user_id": user_id, "session_id": session_id, "ts": ts}

    if topic_kind == "frames":
        ctype = _need(h, "content_type").strip().lower()
        if ctype not in (JPEG, "image/jpg"):
            raise InvalidMessage(UNSUPPORTED_CONTENT_TYPE, f"frames need image/jpeg, got {ctype!r}")
        seq = _int(h, "seq")
        if seq is None or not 0 <= seq <= BIGINT_MAX:
            raise InvalidMessage(INVALID_HEADER, f"seq must be in [0, {BIGINT_MAX}], got {seq}")
        check_jpeg(value, limits.max_frame_pixels)
        return FrameMessage(**base, seq=seq, jpeg=value)
    if topic_kind == "audio":
        return _decode_audio(h, value, base, limits)
    return _decode_control(value, base, now, limits)


# --- audio helpers for consumers -----------------------------------------------------------


def wav_bytes(pcm: bytes, sample_rate: int, channels: int = 1) -> bytes:
    """Wrap raw PCM16 LE in a WAV container."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm)
    return buf.getvalue()


def as_wav(msg: AudioMessage) -> bytes:
    """The chunk as a WAV file (what the blob store keeps)."""
    return msg.data if msg.content_type == WAV else wav_bytes(msg.data, msg.sample_rate)
