"""The capture spool: a window's frames and audio on local disk until its container is stored.

A window's container is written once, when it closes; until then, at every Bytewax snapshot,
its captures not yet spooled are appended here, so a snapshot holds only references. One
append-only file of checksummed records per (user, window start): a record cut short by a
crash is skipped, and its capture, having come after the snapshot, is read again from Kafka.
Keep it beside the recovery directory: a snapshot is only as durable as its spool.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from worldmm.durable import make_dirs, sync_dir
from worldmm.models import SAFE_ID_RE

MAGIC = b"WMSP"
_HEAD = struct.Struct("<4sHII")  # magic, key length, data length, CRC-32 of key + data
_MAX_RECORD = 256 << 20
_APPEND = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
SUFFIX = ".spool"


def _record(key: str, data: bytes) -> bytes:
    k = key.encode()
    return _HEAD.pack(MAGIC, len(k), len(data), zlib.crc32(data, zlib.crc32(k))) + k + data


def parse(blob: bytes) -> dict[str, bytes]:
    """Every intact record of a spool file, by key (the last copy wins). After a damaged
    record the scan resynchronises on the next magic whose checksum holds."""
    out: dict[str, bytes] = {}
    pos, n = 0, len(blob)
    while pos + _HEAD.size <= n:
        magic, klen, dlen, crc = _HEAD.unpack_from(blob, pos)
        end = pos + _HEAD.size + klen + dlen
        if magic == MAGIC and dlen <= _MAX_RECORD and end <= n:
            k = blob[pos + _HEAD.size : pos + _HEAD.size + klen]
            data = blob[pos + _HEAD.size + klen : end]
            if zlib.crc32(data, zlib.crc32(k)) == crc:
                try:
                    out[k.decode()] = data
                    pos = end
                    continue
                except UnicodeDecodeError:
                    pass
        nxt = blob.find(MAGIC, pos + 1)
        if nxt < 0:
            break
        pos = nxt
    return out


class WindowSpool:
    """Spool files under ``root``: ``<user>/<window start ms>.spool``. Stateless, so every
    part of a process may build its own."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"WindowSpool({str(self.root)!r})"

    def path(self, user_id: str, start_ms: int) -> Path:
        if not SAFE_ID_RE.fullmatch(user_id) or user_id in (".", ".."):
            raise ValueError(f"unsafe user id {user_id!r}")
        return self.root / user_id / f"{int(start_ms)}{SUFFIX}"

    def append(self, user_id: str, start_ms: int, entries: Iterable[tuple[str, bytes]]) -> int:
        """Append captures (key, bytes) in one write, on disk when it returns (the snapshot
        taken next counts on them); returns the bytes written. Raises OSError when the disk
        refuses (the caller keeps the bytes in memory then)."""
        buf = b"".join(_record(k, d) for k, d in entries)
        if not buf:
            return 0
        path = self.path(user_id, start_ms)
        try:
            fd, created = os.open(path, _APPEND), False
        except FileNotFoundError:  # a new window (or its user's directory was swept)
            make_dirs(path.parent)
            fd, created = os.open(path, _APPEND | os.O_CREAT, 0o600), True
        try:
            view = memoryview(buf)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            sync_dir(path.parent)
        return len(buf)

    def read(self, user_id: str, start_ms: int) -> dict[str, bytes]:
        """The spooled captures of a window (empty when it has no spool)."""
        try:
            return parse(self.path(user_id, start_ms).read_bytes())
        except FileNotFoundError:
            return {}

    def delete(self, user_id: str, start_ms: int) -> None:
        self.path(user_id, start_ms).unlink(missing_ok=True)

    def windows(self) -> Iterator[tuple[str, int]]:
        """(user, window start) of every spool file present."""
        if not self.root.is_dir():
            return
        for user_dir in sorted(self.root.iterdir()):
            for f in sorted(user_dir.glob(f"*{SUFFIX}")):
                stem = f.name[: -len(SUFFIX)]
                if stem.isdigit():
                    yield user_dir.name, int(stem)
