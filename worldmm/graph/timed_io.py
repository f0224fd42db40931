"""Bytes of a :class:`~worldmm.graph.timed.TimedGraph` for the Redis cache: numpy buffers.

A cold process loads a graph with one ``frombuffer`` per column, CSR included, instead of
re-walking rows into Python objects (an earlier JSON format took most of a second per week).
Code-free: never pickle, so bytes read back from a shared cache can never run code. Layout:
``TIMED_MAGIC`` + 8 random bytes (payloads never share a prefix: the cache compares
prefixes) + a 4-byte header length + the header (JSON: sizes, fingerprint, the string
columns) + the raw arrays in ``_ARRAYS`` order, little-endian.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from worldmm.graph.timed import Csr, TimedGraph

TIMED_MAGIC = b"WMT2"  # 2: CSR rows sorted by time (a WMT1 payload is not read)
_NONCE_BYTES = 8
# (attribute, dtype, length: "n" vertices, "u" units, "n1" vertices + 1, "c" CSR entries)
_ARRAYS = (
    ("kind", "<i1", "n"),
    ("segment_id", "<i8", "n"),
    ("v_from", "<i8", "n"),
    ("src", "<i4", "u"),
    ("dst", "<i4", "u"),
    ("ukind", "<i1", "u"),
    ("weight", "<f8", "u"),
    ("t_from", "<i8", "u"),
    ("t_to", "<i8", "u"),
    ("triple_id", "<i8", "u"),
    ("indptr", "<i8", "n1"),
    ("unit", "<i8", "c"),
)


class TimedFormatError(ValueError):
    """Bytes are not a graph written by :func:`dumps_timed` (wrong magic, corrupt, short)."""


def dumps_timed(graph: TimedGraph) -> bytes:
    assert graph.csr is not None
    header = {
        "memory_type": graph.memory_type,
        "fingerprint": graph.fingerprint,
        "n": graph.n,
        "u": graph.units,
        "c": len(graph.csr.unit),
        "sealed": graph.sealed,
        "seal_every": graph.seal_every,
        "names": graph.names,
        "label": graph.label,
        "predicate": graph.predicate,
    }
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    parts = [TIMED_MAGIC, os.urandom(_NONCE_BYTES), struct.pack("<I", len(head)), head]
    columns = {"indptr": graph.csr.indptr, "unit": graph.csr.unit}
    for attr, dtype, _ in _ARRAYS:
        value = columns[attr] if attr in columns else getattr(graph, attr)
        parts.append(np.ascontiguousarray(value, dtype=dtype).tobytes())
    return b"".join(parts)


def loads_timed(data: bytes) -> TimedGraph:
    if not data.startswith(TIMED_MAGIC):
        raise TimedFormatError("not a worldmm time-masked graph (bad magic)")
    try:
        at = len(TIMED_MAGIC) + _NONCE_BYTES
        (head_len,) = struct.unpack_from("<I", data, at)
        at += 4
        header = json.loads(data[at : at + head_len])
        at += head_len
        sizes = {"n": header["n"], "u": header["u"], "n1": header["n"] + 1, "c": header["c"]}
        cols: dict[str, np.ndarray] = {}
        for attr, dtype, length in _ARRAYS:
            count = int(sizes[length])
            cols[attr] = np.frombuffer(data, dtype=dtype, count=count, offset=at)
            at += cols[attr].nbytes
        if at != len(data):
            raise TimedFormatError(f"{len(data) - at} trailing bytes")
        csr = Csr(indptr=cols.pop("indptr"), unit=cols.pop("unit"))
        return TimedGraph(
            memory_type=header["memory_type"],
            names=header["names"],
            label=header["label"],
            predicate=header["predicate"],
            fingerprint=header["fingerprint"],
            seal_every=int(header["seal_every"]),
            csr=csr,
            sealed=int(header["sealed"]),
            **cols,
        )
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        if isinstance(exc, TimedFormatError):
            raise
        raise TimedFormatError(f"corrupt time-masked graph bytes: {exc}") from exc
