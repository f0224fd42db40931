"""A compact, code-free byte format for memory graphs (what the Redis cache stores).

Not pickle: bytes read back from a shared cache must never be able to run code. Layout:
``MAGIC`` + 8 random bytes (so two payloads never share a prefix: the cache compares
prefixes) + zlib(JSON) with the vertex and edge attribute columns and the graph's
``fingerprint``; edges as a flat list of vertex indices. Other attributes are not kept.
"""

from __future__ import annotations

import json
import os
import zlib

import igraph as ig

MAGIC = b"WMG1"
_VERTEX_ATTRS = ("name", "kind", "label", "segment_id")
_NONCE_BYTES = 8
_GRAPH_ATTRS = ("fingerprint",)
_EDGE_ATTRS = ("weight", "kind", "triple_id", "predicate", "subject", "valid_from")


class GraphFormatError(ValueError):
    """Bytes are not a graph written by :func:`dumps` (wrong magic, corrupt or truncated)."""


def dumps(graph: ig.Graph) -> bytes:
    vattrs = set(graph.vs.attributes())
    eattrs = set(graph.es.attributes())
    gattrs = set(graph.attributes())
    body = {
        "g": {a: graph[a] for a in _GRAPH_ATTRS if a in gattrs},
        "n": graph.vcount(),
        "v": {a: graph.vs[a] for a in _VERTEX_ATTRS if a in vattrs},
        "edges": [i for pair in graph.get_edgelist() for i in pair],
        "e": {a: graph.es[a] for a in _EDGE_ATTRS if a in eattrs},
    }
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return MAGIC + os.urandom(_NONCE_BYTES) + zlib.compress(raw, 1)


def loads(data: bytes) -> ig.Graph:
    if not data.startswith(MAGIC):
        raise GraphFormatError("not a worldmm graph (bad magic)")
    try:
        body = json.loads(zlib.decompress(data[len(MAGIC) + _NONCE_BYTES :]))
        flat = body["edges"]
        g = ig.Graph(n=int(body["n"]), directed=False)
        g.add_edges(list(zip(flat[0::2], flat[1::2], strict=True)))
        for attr, value in body.get("g", {}).items():
            g[attr] = value
        for attr, values in body["v"].items():
            g.vs[attr] = values
        for attr, values in body["e"].items():
            g.es[attr] = values
    except (zlib.error, ValueError, KeyError, TypeError) as exc:
        raise GraphFormatError(f"corrupt graph bytes: {exc}") from exc
    return g
