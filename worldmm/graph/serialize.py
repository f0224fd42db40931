"""A compact, code-free byte format for memory graphs (what the Redis cache stores).

Not pickle: bytes read back from a shared cache must never be able to run code. Layout:
``MAGIC`` + zlib(JSON) with the vertex and edge attribute columns; edges as a flat list of
vertex indices. Attributes outside the known columns are not kept.
"""

from __future__ import annotations

import json
import zlib

import igraph as ig

MAGIC = b"WMG1"
_VERTEX_ATTRS = ("name", "kind", "label", "segment_id")
_EDGE_ATTRS = ("weight", "kind", "triple_id", "predicate", "subject", "valid_from")


class GraphFormatError(ValueError):
    """Bytes are not a graph written by :func:`dumps` (wrong magic, corrupt or truncated)."""


def dumps(graph: ig.Graph) -> bytes:
    vattrs = set(graph.vs.attributes())
    eattrs = set(graph.es.attributes())
    body = {
        "n": graph.vcount(),
        "v": {a: graph.vs[a] for a in _VERTEX_ATTRS if a in vattrs},
        "edges": [i for pair in graph.get_edgelist() for i in pair],
        "e": {a: graph.es[a] for a in _EDGE_ATTRS if a in eattrs},
    }
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return MAGIC + zlib.compress(raw, 1)


def loads(data: bytes) -> ig.Graph:
    if not data.startswith(MAGIC):
        raise GraphFormatError("not a worldmm graph (bad magic)")
    try:
        body = json.loads(zlib.decompress(data[len(MAGIC) :]))
        flat = body["edges"]
        g = ig.Graph(n=int(body["n"]), directed=False)
        g.add_edges(list(zip(flat[0::2], flat[1::2], strict=True)))
        for attr, values in body["v"].items():
            g.vs[attr] = values
        for attr, values in body["e"].items():
            g.es[attr] = values
    except (zlib.error, ValueError, KeyError, TypeError) as exc:
        raise GraphFormatError(f"corrupt graph bytes: {exc}") from exc
    return g
