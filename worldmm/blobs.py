"""Blob store for frames and audio: a local directory by default, S3 optionally.

A 30 s window's captures are stored as one object, a window media container
(``media/<user>/<window start ms>-<digest>.wmc``, :mod:`worldmm.media`); a capture keeps its
logical key (``frames/<user>/<session>/<ts>-<seq>.jpg``, ``audio/...wav``), under which it was
stored alone before containers and still is when it arrives after its window closed. Keys
are derived from identities or contents, so writing the same thing twice (at-least-once
delivery, replays) lands on the same key: ``put`` is idempotent. Keys are validated before
they touch a path, so no user-supplied id can escape the store root.

Every failure of a backend (disk full, S3 unreachable or refusing) is a
:class:`BlobStoreError`, an ``OSError``: callers decide on one exception type whatever the
backend. Every request is counted (``worldmm_blob_requests_total``).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from worldmm.durable import make_dirs, sync_dir
from worldmm.metrics import BLOB_BYTES, BLOB_REQUESTS
from worldmm.models import SAFE_ID_RE, from_epoch_ms, to_epoch_ms

_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,200}$")
KINDS = ("frames", "audio")
MEDIA = "media"  # window media containers


class BlobKeyError(ValueError):
    """A key or prefix that is not a safe relative path of allowed segments."""


class BlobNotFound(KeyError):
    """No blob under that key."""


class BlobStoreError(OSError):
    """The blob store failed (I/O error, disk full, service unreachable or refusing): the
    data is intact, the store is not; a write is worth retrying once it is back."""


def validate_key(key: str, *, prefix: bool = False) -> str:
    """Return ``key`` if it is ``seg/seg/...`` of safe segments; raise BlobKeyError otherwise.

    A prefix may end with ``/`` and its last segment may be partial.
    """
    if not isinstance(key, str) or not key:
        raise BlobKeyError("empty key")
    body = key[:-1] if prefix and key.endswith("/") else key
    parts = body.split("/")
    for part in parts:
        if part in ("", ".", "..") or not _SEGMENT_RE.fullmatch(part):
            raise BlobKeyError(f"unsafe key {key!r}: segment {part!r} not allowed")
    return key


def _safe_id(value: str, what: str) -> str:
    if not SAFE_ID_RE.fullmatch(value) or value in (".", ".."):
        raise BlobKeyError(f"unsafe {what} {value!r}")
    return value


def frame_key(user_id: str, session_id: str, ts: datetime, seq: int) -> str:
    if seq < 0:
        raise BlobKeyError(f"seq must be ≥ 0, got {seq}")
    user, session = _safe_id(user_id, "user id"), _safe_id(session_id, "session id")
    return f"frames/{user}/{session}/{to_epoch_ms(ts)}-{seq}.jpg"


def capture_time(key: str) -> datetime | None:
    """The capture time a frame or audio key carries (None for any other key)."""
    name = key.rsplit("/", 1)[-1]
    stamp = name.split("-", 1)[0].split(".", 1)[0]
    if not key.startswith(("frames/", "audio/")) or not stamp.isdigit():
        return None
    return from_epoch_ms(int(stamp))


def audio_key(user_id: str, session_id: str, ts: datetime) -> str:
    user, session = _safe_id(user_id, "user id"), _safe_id(session_id, "session id")
    return f"audio/{user}/{session}/{to_epoch_ms(ts)}.wav"


def window_media_prefix(user_id: str, window_start_ms: int) -> str:
    """Prefix of every container written for one window of one user."""
    if window_start_ms < 0:
        raise BlobKeyError(f"window start must be ≥ 0, got {window_start_ms}")
    return f"{MEDIA}/{_safe_id(user_id, 'user id')}/{window_start_ms}-"


def window_media_key(user_id: str, window_start_ms: int, digest: str) -> str:
    """Key of a window's container; ``digest`` (of its bytes) makes it content-addressed."""
    if not re.fullmatch(r"[0-9a-f]{8,64}", digest):
        raise BlobKeyError(f"container digest must be hex, got {digest!r}")
    return f"{window_media_prefix(user_id, window_start_ms)}{digest}.wmc"


def user_prefixes(user_id: str) -> list[str]:
    """Every prefix that holds one user's blobs (for purging a user)."""
    user = _safe_id(user_id, "user id")
    return [f"{kind}/{user}/" for kind in (*KINDS, MEDIA)]


@runtime_checkable
class BlobStore(Protocol):
    def put(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key``; True if written, False if already there unchanged."""
        ...

    def get(self, key: str) -> bytes:
        """The blob's bytes; BlobNotFound if absent."""
        ...

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes of the blob from ``offset`` (one ranged read); BlobNotFound if
        absent, BlobStoreError if the blob is shorter."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str) -> list[str]:
        """Keys starting with ``prefix`` (string prefix, like S3), sorted."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key starting with ``prefix``; return how many were deleted."""
        ...


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class LocalBlobStore:
    """Blobs as files under ``root``. A new key is created exclusively; replacing an existing
    key's bytes is atomic (temp file in the same dir + rename)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._root_s = str(self.root)
        self._dirs: set[str] = set()  # directories made and checked by put()
        self._tmp_ids = itertools.count()  # with the pid: unique temp names, no random draw

    def __repr__(self) -> str:
        return f"LocalBlobStore({str(self.root)!r})"

    def path(self, key: str) -> Path:
        path = (self.root / validate_key(key)).resolve()
        # Belt and braces: validation already forbids '..', but symlinks could still escape.
        if self.root not in path.parents:
            raise BlobKeyError(f"key {key!r} resolves outside the store")
        return path

    def put(self, key: str, data: bytes) -> bool:
        BLOB_REQUESTS.labels("local", "put").inc()
        BLOB_BYTES.labels("local", "put").inc(len(data))
        try:
            return self._put(key, data)
        except BlobKeyError:
            raise
        except OSError as exc:
            raise BlobStoreError(f"local blob write of {key!r} failed: {exc}") from exc

    def _put(self, key: str, data: bytes) -> bool:
        # The ingest hot path (one container per window): a new key costs one exclusive
        # create, one write and a close. Nothing reads a key before its row is in the
        # database (written after the blob), and a write cut short by a crash is replaced
        # atomically by the rewrite, because the bytes differ. The full resolve() of path()
        # costs an lstat per path component, so only a new directory is resolved (once per
        # process) and checked to lie inside the root.
        directory, name = self._dir_of(key)
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, _CREATE, 0o644)
        except FileNotFoundError:  # a concurrent delete_prefix removed the directory
            self._dirs.discard(directory)
            directory, _ = self._dir_of(key)
            fd = os.open(path, _CREATE, 0o644)
        except FileExistsError:
            return self._replace(path, directory, data)
        try:
            view = memoryview(data)
            while view:  # os.write, not a file object: no buffer or wrapper per blob
                view = view[os.write(fd, view) :]
            os.fsync(fd)  # on disk before the row that names it is written
        except BaseException:
            Path(path).unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        sync_dir(directory)  # and its name
        return True

    def _replace(self, path: str, directory: str, data: bytes) -> bool:
        """The key exists: keep it if it holds ``data``, else swap in a complete new file."""
        try:
            with open(path, "rb") as fh:
                if fh.read() == data:
                    return False
        except IsADirectoryError:
            raise BlobKeyError(f"{path!r} is a directory") from None
        tmp = os.path.join(directory, f".tmp-{os.getpid()}-{next(self._tmp_ids)}")
        try:
            with open(tmp, "xb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        sync_dir(directory)
        return True

    def _dir_of(self, key: str) -> tuple[str, str]:
        """(existing directory, file name) of a validated key."""
        rel_dir, _, name = validate_key(key).rpartition("/")
        directory = os.path.join(self._root_s, rel_dir) if rel_dir else self._root_s
        if directory not in self._dirs:
            resolved = Path(directory).resolve()  # before mkdir: never create through a link
            if resolved != self.root and self.root not in resolved.parents:
                raise BlobKeyError(f"key {key!r} resolves outside the store")
            make_dirs(directory)
            self._dirs.add(directory)
        return directory, name

    def get(self, key: str) -> bytes:
        BLOB_REQUESTS.labels("local", "get").inc()
        path = self.path(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            raise BlobNotFound(key) from None
        except OSError as exc:
            raise BlobStoreError(f"local blob read of {key!r} failed: {exc}") from exc
        BLOB_BYTES.labels("local", "get").inc(len(data))
        return data

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        BLOB_REQUESTS.labels("local", "get_range").inc()
        if offset < 0 or length < 0:
            raise ValueError(f"bad range {offset}+{length}")
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, IsADirectoryError):
            raise BlobNotFound(key) from None
        except OSError as exc:
            raise BlobStoreError(f"local blob read of {key!r} failed: {exc}") from exc
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) != length:
            raise BlobStoreError(f"blob {key!r} ends before {offset}+{length}")
        BLOB_BYTES.labels("local", "get").inc(len(data))
        return data

    def exists(self, key: str) -> bool:
        BLOB_REQUESTS.labels("local", "head").inc()
        return self.path(key).is_file()

    def _walk(self, prefix: str) -> Iterator[tuple[str, Path]]:
        validate_key(prefix, prefix=True)
        # Only the directory that the prefix's complete segments name needs walking.
        base_rel = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        base = self.root / base_rel if base_rel else self.root
        if not base.is_dir():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                if name.startswith(".tmp-"):
                    continue
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield key, full

    def list(self, prefix: str) -> list[str]:
        BLOB_REQUESTS.labels("local", "list").inc()
        return sorted(key for key, _ in self._walk(prefix))

    def delete_prefix(self, prefix: str) -> int:
        BLOB_REQUESTS.labels("local", "delete").inc()
        count, parents = 0, set()
        for _key, path in list(self._walk(prefix)):
            path.unlink(missing_ok=True)
            parents.add(path.parent)
            count += 1
        # Remove directories the deletion left empty, deepest first.
        for d in sorted(parents, key=lambda p: len(p.parts), reverse=True):
            while d != self.root and d.is_dir() and not any(d.iterdir()):
                d.rmdir()
                d = d.parent
        return count


class S3BlobStore:
    """Blobs in an S3 bucket (or an S3-protocol server: MinIO, Ceph) under ``prefix``. boto3
    is an optional dependency (the ``s3`` extra)."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        client: Any = None,
        *,
        endpoint_url: str | None = None,
        **client_kwargs: Any,
    ):
        if client is None:
            try:
                import boto3
            except ImportError as exc:
                raise ImportError(
                    "S3BlobStore needs boto3: pip install boto3 "
                    "(or unset WORLDMM_BLOB_S3_URI to use the local blob directory)"
                ) from exc
            client = boto3.client("s3", endpoint_url=endpoint_url, **client_kwargs)
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""

    def __repr__(self) -> str:
        return f"S3BlobStore(s3://{self.bucket}/{self.prefix})"

    def _k(self, key: str, *, prefix: bool = False) -> str:
        return self.prefix + validate_key(key, prefix=prefix)

    def _call(self, op: str, key: str, fn: Any, **kwargs: Any) -> Any:
        """One request; a missing key is BlobNotFound, any other failure BlobStoreError."""
        BLOB_REQUESTS.labels("s3", op).inc()
        try:
            return fn(Bucket=self.bucket, **kwargs)
        except Exception as exc:
            if _is_missing(exc):
                raise BlobNotFound(key) from None
            raise BlobStoreError(f"S3 {op} of {key!r} failed: {_describe(exc)}") from exc

    def put(self, key: str, data: bytes) -> bool:
        # Same key, same bytes: overwriting is harmless, so skip the extra HEAD round trip.
        self._call("put", key, self.client.put_object, Key=self._k(key), Body=data)
        BLOB_BYTES.labels("s3", "put").inc(len(data))
        return True

    def _read(self, obj: Any, key: str) -> bytes:
        try:
            data = obj["Body"].read()
        except Exception as exc:  # the connection can drop mid-body
            raise BlobStoreError(f"S3 read of {key!r} failed: {_describe(exc)}") from exc
        BLOB_BYTES.labels("s3", "get").inc(len(data))
        return data

    def get(self, key: str) -> bytes:
        obj = self._call("get", key, self.client.get_object, Key=self._k(key))
        return self._read(obj, key)

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise ValueError(f"bad range {offset}+{length}")
        if length == 0:
            return b""
        rng = f"bytes={offset}-{offset + length - 1}"
        obj = self._call("get_range", key, self.client.get_object, Key=self._k(key), Range=rng)
        data = self._read(obj, key)
        if len(data) != length:
            raise BlobStoreError(f"blob {key!r} ends before {offset}+{length}")
        return data

    def exists(self, key: str) -> bool:
        try:
            self._call("head", key, self.client.head_object, Key=self._k(key))
        except BlobNotFound:
            return False
        return True

    def _iter(self, prefix: str) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=self._k(prefix, prefix=True))
        try:
            for page in pages:
                BLOB_REQUESTS.labels("s3", "list").inc()
                for obj in page.get("Contents", []):
                    yield obj["Key"][len(self.prefix) :]
        except Exception as exc:
            raise BlobStoreError(f"S3 list of {prefix!r} failed: {_describe(exc)}") from exc

    def list(self, prefix: str) -> list[str]:
        return sorted(self._iter(prefix))

    def delete_prefix(self, prefix: str) -> int:
        keys = list(self._iter(prefix))
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = [{"Key": self.prefix + k} for k in keys[i : i + 1000]]
            self._call(
                "delete",
                prefix,
                self.client.delete_objects,
                Delete={"Objects": batch, "Quiet": True},
            )
        return len(keys)


def _error_code(exc: Exception) -> str | None:
    """The S3 error code of a refused request; None for a failure without a response (a
    timeout, a refused connection: their exceptions carry ``response`` None or nothing)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return str(code) if code is not None else None


def _is_missing(exc: Exception) -> bool:
    code = _error_code(exc)
    return code in ("404", "NoSuchKey", "NotFound")


def _describe(exc: Exception) -> str:
    """A failure in a line: the S3 error code when there is one (never a signed URL)."""
    code = _error_code(exc)
    return f"{type(exc).__name__} {code}" if code else type(exc).__name__


def parse_s3_uri(uri: str) -> tuple[str, str]:
    m = re.fullmatch(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?", uri.strip())
    if not m:
        raise ValueError(f"not an s3://bucket[/prefix] URI: {uri!r}")
    return m.group(1), (m.group(2) or "")


def build_blob_store(settings: Any) -> BlobStore:
    """S3 when ``settings.blob_s3_uri`` is set, else the local directory."""
    uri = getattr(settings, "blob_s3_uri", None)
    if uri:
        bucket, prefix = parse_s3_uri(uri)
        return S3BlobStore(bucket, prefix, endpoint_url=settings.blob_s3_endpoint_url)
    return LocalBlobStore(settings.resolved_blob_dir)
