"""The window media container: one stored object holding a 30 s window's frames and audio.

One PUT per window instead of one per capture, while a capture stays one ranged read (its row
keeps its offset and length). Building is deterministic and the key ends in a digest of the
bytes, so rewriting a window (a replay, a retry) is idempotent and an object never changes
under offsets a row points at. The layout: docs/architecture.md ("Window media").
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass

MAGIC = b"WMC1"
_HEAD = struct.Struct("<4sI")
VERSION = 1
MAX_INDEX_BYTES = 16 << 20  # a window holds a few dozen captures; anything larger is corrupt


class ContainerError(ValueError):
    """Bytes that are not a well-formed window media container."""


@dataclass(frozen=True)
class _CaptureInfo:
    """What a container says of one capture besides its bytes."""

    key: str  # logical blob key of the capture
    kind: str  # "frames" | "audio"
    ts_ms: int
    end_ms: int
    _: KW_ONLY  # the optional fields by keyword: a subclass's own fields follow them
    seq: int | None = None
    sample_rate: int | None = None
    content_type: str = "image/jpeg"


@dataclass(frozen=True)
class Capture(_CaptureInfo):
    """One frame or audio chunk going into a container."""

    data: bytes


@dataclass(frozen=True)
class Entry(_CaptureInfo):
    """Where one capture lies inside a container."""

    offset: int
    length: int
    crc32: int


@dataclass(frozen=True)
class Container:
    """A built container: its bytes and where each capture lies in them."""

    data: bytes
    entries: tuple[Entry, ...]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()[:20]

    def entry(self, key: str) -> Entry:
        for e in self.entries:
            if e.key == key:
                return e
        raise KeyError(key)


def _order(c: Capture) -> tuple[int, str, str]:
    return (c.ts_ms, c.kind, c.key)


def build(captures: Iterable[Capture]) -> Container:
    """Pack ``captures`` (one per key: a key given twice keeps its last bytes)."""
    unique = {c.key: c for c in captures}
    ordered = sorted(unique.values(), key=_order)
    rel, metas = 0, []
    for c in ordered:
        metas.append((c, rel, zlib.crc32(c.data)))
        rel += len(c.data)

    def index_bytes(base: int) -> bytes:
        entries = [
            {
                "key": c.key,
                "kind": c.kind,
                "ts_ms": c.ts_ms,
                "end_ms": c.end_ms,
                "offset": base + off,
                "length": len(c.data),
                "crc32": crc,
                "seq": c.seq,
                "sample_rate": c.sample_rate,
                "content_type": c.content_type,
            }
            for c, off, crc in metas
        ]
        doc = {"v": VERSION, "entries": entries}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    # Offsets are absolute, so the index's own length is part of them: iterate to the fixed
    # point (the length only grows with the base, and settles within a few rounds).
    base = _HEAD.size
    index = index_bytes(base)
    while _HEAD.size + len(index) != base:
        base = _HEAD.size + len(index)
        index = index_bytes(base)
    data = b"".join([_HEAD.pack(MAGIC, len(index)), index, *(c.data for c in ordered)])
    return Container(data, _entries(json.loads(index)))


def _entries(doc: dict) -> tuple[Entry, ...]:
    if not isinstance(doc, dict) or doc.get("v") != VERSION:
        raise ContainerError(f"unsupported container index version {doc.get('v')!r}")
    try:
        return tuple(Entry(**e) for e in doc["entries"])
    except (KeyError, TypeError) as exc:
        raise ContainerError(f"malformed container index: {exc}") from None


def index_length(head: bytes) -> int:
    """The index length from the first 8 bytes (to read just the index with a ranged read)."""
    if len(head) < _HEAD.size:
        raise ContainerError("truncated container header")
    magic, n = _HEAD.unpack_from(head)
    if magic != MAGIC:
        raise ContainerError(f"not a window media container (magic {magic!r})")
    if n > MAX_INDEX_BYTES:
        raise ContainerError(f"container index of {n} bytes is implausible")
    return n


def read_index(data: bytes) -> tuple[Entry, ...]:
    """The entries of a container, from its bytes (or from at least its header + index)."""
    n = index_length(data)
    if len(data) < _HEAD.size + n:
        raise ContainerError("truncated container index")
    try:
        doc = json.loads(data[_HEAD.size : _HEAD.size + n])
    except ValueError as exc:
        raise ContainerError(f"container index is not JSON: {exc}") from None
    return _entries(doc)


def payload(data: bytes, entry: Entry, *, verify: bool = True) -> bytes:
    """One capture's bytes out of a whole container."""
    end = entry.offset + entry.length
    if entry.offset < _HEAD.size or end > len(data):
        raise ContainerError(f"entry {entry.key!r} lies outside the container")
    out = data[entry.offset : end]
    if verify and zlib.crc32(out) != entry.crc32:
        raise ContainerError(f"entry {entry.key!r} fails its CRC check")
    return out
