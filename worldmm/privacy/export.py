"""Everything held about one user as one streamed archive (a gzipped tar): a manifest, one
JSON-lines file per table and every frame and audio chunk still held (docs/privacy.md).

Paged through server-side cursors and spooled table by table, so a year of memory never sits
in memory; one REPEATABLE READ transaction, so the manifest counts exactly the rows in the
files. Secrets (API key hashes) are left out.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING

import psycopg
from psycopg import sql

from worldmm.blobs import BlobNotFound
from worldmm.media.window import read_capture
from worldmm.store.frames import MediaRef
from worldmm.store.purge import user_tables

if TYPE_CHECKING:
    from worldmm.blobs import BlobStore
    from worldmm.store.db import Database

FORMAT = "worldmm-export/1"
SPOOL_BYTES = 8 << 20
# columns never exported: they are credentials, not data about the user
REDACTED = {"api_keys": ("key_hash",), "ui_sessions": ("id_hash", "csrf_token")}


@dataclass
class Manifest:
    user_id: str
    exported_at: datetime
    tables: dict[str, int] = field(default_factory=dict)
    media: dict[str, int] = field(default_factory=lambda: {"frames": 0, "audio": 0})
    media_missing: list[str] = field(default_factory=list)
    files: dict[str, dict[str, object]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT,
            "user_id": self.user_id,
            "exported_at": self.exported_at.isoformat(),
            "tables": self.tables,
            "media": self.media,
            "media_missing": self.media_missing,
            "files": self.files,
        }
        return json.dumps(body, indent=2, sort_keys=True).encode()


class _Pipe(io.RawIOBase):
    """The tar writer's file: collects what it writes until the generator takes it."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.chunks.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out, self.chunks = b"".join(self.chunks), []
        return out


def _table_queries(conn: psycopg.Connection, user_id: str) -> list[tuple[str, sql.Composed]]:
    """(name, query of its rows as JSON) for every table holding the user's rows."""
    out = [("users", sql.SQL("SELECT to_jsonb(t) FROM users t WHERE id = %s").format())]
    for table in user_tables(conn):
        drop = sql.SQL("").join(
            sql.SQL(" - {}").format(sql.Literal(c)) for c in REDACTED.get(table, ())
        )
        query = sql.SQL("SELECT to_jsonb(t){} FROM {} t WHERE user_id = %s").format(
            drop, sql.Identifier(table)
        )
        out.append((table, query))
    audit = sql.SQL("SELECT to_jsonb(t) FROM admin_audit t WHERE subject_user = %s")
    out.append(("admin_audit", audit.format()))
    return out


def _add(
    tar: tarfile.TarFile, name: str, data: IO[bytes], size: int, manifest: Manifest, digest: str
) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(manifest.exported_at.timestamp()), 0o600
    tar.addfile(info, data)
    manifest.files[name] = {"bytes": size, "sha256": digest}


def export_user(
    db: Database,
    blobs: BlobStore,
    user_id: str,
    now: datetime,
    *,
    page: int = 1000,
    statement_timeout_s: float | None = None,
    idle_timeout_s: float | None = None,
) -> Iterator[bytes]:
    """The archive of ``user_id``, in chunks as it is written (a user that does not exist, or
    was purged, gets a manifest and no rows). It reads on a connection of its own, never a
    pooled one, and its snapshot lasts as long as its reader: the timeouts bound one read
    and the wait for a slow reader (:meth:`Database.dedicated`)."""
    pipe = _Pipe()
    manifest = Manifest(user_id, now)
    connection = db.dedicated(
        statement_timeout_s=statement_timeout_s,
        idle_timeout_s=idle_timeout_s,
        application_name="worldmm-export",
    )
    with connection as conn, tarfile.open(fileobj=pipe, mode="w|gz") as tar:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for table, query in _table_queries(conn, user_id):
            with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
                rows, digest = 0, hashlib.sha256()
                with conn.cursor(name=f"export_{table}") as cur:
                    cur.itersize = page
                    cur.execute(query, (user_id,))
                    for (row,) in cur:
                        line = json.dumps(row, sort_keys=True, default=str).encode() + b"\n"
                        spool.write(line)
                        digest.update(line)
                        rows += 1
                manifest.tables[table] = rows
                size = spool.tell()
                spool.seek(0)
                _add(tar, f"tables/{table}.jsonl", spool, size, manifest, digest.hexdigest())
            yield pipe.take()
        yield from _media(conn, tar, pipe, blobs, user_id, manifest, page)
        data = manifest.to_json()
        info = tarfile.TarInfo("manifest.json")
        info.size, info.mtime, info.mode = len(data), int(now.timestamp()), 0o600
        tar.addfile(info, io.BytesIO(data))
    yield pipe.take()


def _media(
    conn: psycopg.Connection,
    tar: tarfile.TarFile,
    pipe: _Pipe,
    blobs: BlobStore,
    user_id: str,
    manifest: Manifest,
    page: int,
) -> Iterator[bytes]:
    """Every frame and audio chunk still held, one blob at a time."""
    for kind, table in (("frames", "frames"), ("audio", "audio_chunks")):
        with conn.cursor(name=f"export_media_{table}") as cur:
            cur.itersize = page
            cur.execute(
                sql.SQL(
                    "SELECT blob_key, media_key, media_offset, media_length FROM {}"
                    " WHERE user_id = %s ORDER BY id"
                ).format(sql.Identifier(table)),
                (user_id,),
            )
            for key, media_key, offset, length in cur:
                ref = MediaRef(media_key, offset or 0, length or 0) if media_key else None
                try:
                    data = read_capture(blobs, key, ref)
                except BlobNotFound:
                    manifest.media_missing.append(key)  # listed, not hidden
                    continue
                digest = hashlib.sha256(data).hexdigest()
                _add(tar, f"media/{key}", io.BytesIO(data), len(data), manifest, digest)
                manifest.media[kind] += 1
                yield pipe.take()
