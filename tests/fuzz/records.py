"""Hypothesis strategies for raw Kafka records of the three ingest topics: valid ones, and
valid ones broken the ways a client, a network or a clock breaks them (missing or doubled
headers, wrong types, huge values, truncated JPEG/WAV, unicode and path separators in ids,
clock skew, key ≠ user)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st
from PIL import Image

from connectors import codec
from dataflows.ingest import RawRecord

NOW = datetime(2026, 5, 4, 9, 50, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
DAY_MS = 86_400_000


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 12), (10, 120, 200)).save(buf, format="JPEG")
    return buf.getvalue()


JPEG = _jpeg()
WAV = codec.wav_bytes(b"\x01\x00" * 8000, 8000)  # 1 s at 8 kHz

good_ids = st.from_regex(r"[A-Za-z0-9_.@-]{1,16}", fullmatch=True).filter(
    lambda s: s not in (".", "..")
)
nasty_ids = st.sampled_from(
    ["", ".", "..", "../../etc", "a/b", "a\\b", "é", "a\x00b", "x" * 200, "\u202eevil",
     " ", "a b", "user:1", "*", "%2F"]
) | st.text(max_size=12)  # fmt: skip
ids = st.one_of(good_ids, good_ids, nasty_ids)

# capture times: mostly plausible (the last day), some skewed far either way
ts_ms = st.one_of(
    st.integers(NOW_MS - DAY_MS, NOW_MS + 60_000),
    st.integers(NOW_MS - 60 * DAY_MS, NOW_MS + 10 * DAY_MS),
    st.sampled_from([0, -1, 2**63 - 1, -(2**63), 10**20]),
)
junk = st.one_of(
    st.binary(max_size=24),
    st.text(max_size=24).map(str.encode),
    st.sampled_from([b"", b"-1", b"9" * 40, b"1e9", b"0x10", b"NaN", b" 12", b"\xff\xfe"]),
)


@st.composite
def valid_record(draw, kind: str) -> tuple[bytes | None, bytes | None, list]:
    user, session = draw(good_ids), draw(good_ids)
    ts = datetime.fromtimestamp(draw(st.integers(NOW_MS - DAY_MS, NOW_MS)) / 1000, UTC)
    if kind == "frames":
        return codec.encode_frame(user, session, ts, draw(st.integers(0, 10**6)), JPEG)
    if kind == "audio":
        return codec.encode_audio(user, session, ts, WAV, duration_ms=1000, sample_rate=8000)
    event = draw(st.sampled_from(["session_start", "session_end"]))
    return codec.encode_control(user, session, ts, event)


def _set(headers: list, name: str, value) -> list:
    return [(k, v) for k, v in headers if k != name] + [(name, value)]


@st.composite
def mutated(draw, record: tuple) -> tuple[bytes | None, bytes | None, list]:
    key, value, headers = record
    headers = list(headers)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(
            ["drop", "junk", "id", "ts", "dup", "truncate", "value", "key", "json", "none"]
        ))  # fmt: skip
        names = [k for k, _ in headers] or ["user_id"]
        if op == "drop" and headers:
            gone = draw(st.sampled_from(names))
            headers = [(k, v) for k, v in headers if k != gone]
        elif op == "junk":
            headers = _set(headers, draw(st.sampled_from(names)), draw(junk))
        elif op == "id":
            new = draw(ids)
            field = draw(st.sampled_from(["user_id", "session_id"]))
            headers = _set(headers, field, new.encode("utf-8", "surrogatepass"))
            if field == "user_id" and draw(st.booleans()):
                key = new.encode("utf-8", "surrogatepass")
        elif op == "ts":
            headers = _set(headers, "ts", str(draw(ts_ms)).encode())
        elif op == "dup":
            headers.append((draw(st.sampled_from(names)), draw(junk)))
        elif op == "truncate" and value:
            value = value[: draw(st.integers(0, max(0, len(value) - 1)))]
        elif op == "value":
            value = draw(st.one_of(st.binary(max_size=64), st.just(b"\xff\xd8\xff" * 10)))
        elif op == "key":
            key = draw(st.one_of(st.none(), st.binary(max_size=12)))
        elif op == "json":
            doc = draw(st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                lambda inner: st.lists(inner, max_size=3)
                | st.dictionaries(st.sampled_from(["event", "last_ms", "frames", "x"]), inner,
                                  max_size=3),
                max_leaves=6,
            ))  # fmt: skip
            value = json.dumps(doc).encode()
        elif op == "none":
            headers = _set(headers, draw(st.sampled_from(names)), None)
    return key, value, headers


@st.composite
def raw_records(draw, max_size: int = 8) -> list[RawRecord]:
    out = []
    for offset in range(draw(st.integers(1, max_size))):
        kind = draw(st.sampled_from(["frames", "audio", "control"]))
        key, value, headers = draw(mutated(draw(valid_record(kind))))
        out.append(RawRecord(kind, f"fuzz.{kind}", key, value, headers, 0, offset))
    return out


def huge_record(limit: int) -> RawRecord:
    """One over the payload limit (built directly: Hypothesis should not draw megabytes)."""
    key, _, headers = codec.encode_frame("big", "s", NOW - timedelta(seconds=5), 1, JPEG)
    return RawRecord("frames", "fuzz.frames", key, JPEG + b"\x00" * limit, headers, 0, 10_000)
