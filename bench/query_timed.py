"""The query benchmark's measurements of the time-masked graphs (:mod:`worldmm.graph.timed`):
build / cold-load / extend cost per graph, questions asked ``as_of`` a past time, how soon a
new 30 s segment is visible, and how closely local push matches exact PRPACK on the
benchmark's own graphs (overlap@k)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from bench.harness import percentile, summary
from bench.query_synth import Query
from worldmm.graph.pagerank import fact_seed_scores, ppr, seed_vertices
from worldmm.graph.timed import build_timed, extend
from worldmm.graph.timed_io import dumps_timed, loads_timed
from worldmm.graph.types import entity_node
from worldmm.models import SCALES


def _ms(xs: Sequence[float]) -> float:
    return round(1000 * (percentile(xs, 50) or 0.0), 1)


def measure_timed_builds(reader: Any, user_id: str) -> dict[str, dict[str, Any]]:
    """Per graph: fetch every row with its time, build the arrays, their Redis bytes (write
    and cold load), and the cost of extending the graph by its newest 30 s segment."""
    out: dict[str, dict[str, Any]] = {}
    for memory_type, scale in [*(("episodic", s) for s in SCALES), ("semantic", None)]:
        t0 = time.perf_counter()
        rows = reader.graph_history(user_id, memory_type, scale)
        t1 = time.perf_counter()
        graph = build_timed(memory_type, rows)
        t2 = time.perf_counter()
        payload = dumps_timed(graph)
        t3 = time.perf_counter()
        loads_timed(payload)
        t4 = time.perf_counter()
        entry: dict[str, Any] = {
            "fetch_ms": _ms([t1 - t0]),
            "build_ms": _ms([t2 - t1]),
            "total_ms": _ms([t2 - t0]),
            "serialise_ms": _ms([t3 - t2]),
            "cold_load_ms": _ms([t4 - t3]),
            "cached_bytes": len(payload),
            "rows": len(rows),
            "vertices": graph.n,
            "units": graph.units,
        }
        if memory_type == "episodic" and rows:
            newest = max(r.segment_id or 0 for r in rows)
            base = build_timed(memory_type, [r for r in rows if r.segment_id != newest])
            new = [r for r in rows if r.segment_id == newest]
            times = []
            for _ in range(3):
                t = time.perf_counter()
                extend(base, new)
                times.append(time.perf_counter() - t)
            entry["extend_one_segment_ms"] = _ms(times)
        out[str(scale) if scale is not None else "semantic"] = entry
    return out


async def _timed_searches(
    deps: Any, user_id: str, queries: Sequence[Query], as_of: Sequence[datetime | None]
) -> list[float]:
    from worldmm.memory.retrieval import search

    times = []
    for q, when in zip(queries, as_of, strict=True):
        t = time.perf_counter()
        await search(deps, q.memory_type, user_id, q.text, when)  # type: ignore[arg-type]
        times.append(1000 * (time.perf_counter() - t))
    return times


def as_of_times(end: datetime, n: int, seed: int, span: timedelta) -> list[datetime]:
    """``n`` question times drawn uniformly from the last ``span`` of the memory."""
    rng = np.random.default_rng(seed)
    return [end - span * float(x) for x in rng.random(n)]


def measure_as_of(
    deps: Any, user_id: str, queries: Sequence[Query], end: datetime, seed: int
) -> list[float]:
    """Episodic searches each asked as of a time in the memory's last week (warm graphs)."""
    times = as_of_times(end, len(queries), seed, timedelta(days=7))
    return asyncio.run(_timed_searches(deps, user_id, queries, times))


def measure_new_segments(
    db: Any, deps: Any, stub: Any, user_id: str, end: datetime, dim: int, n: int
) -> dict[str, Any]:
    """Write a new 30 s segment (3 triples about a new entity) after the memory's end, then
    time the next episodic search; the segment must be among the 30 s graph's ranking of a
    query about its entity (checked after the timed search, from the same graph)."""
    from worldmm.memory.retrieval.graph_lane import rank_scale
    from worldmm.store import entities, segments, triples
    from worldmm.store.models import SegmentWrite, TripleWrite

    rng = np.random.default_rng(7)

    def unit() -> list[float]:
        v = rng.normal(size=dim)
        return (v / np.linalg.norm(v)).astype(np.float32).tolist()

    times, visible = [], []
    written_segments: list[int] = []
    written_entities: list[int] = []
    for i in range(n):
        start = end + timedelta(seconds=30 * i)
        name, other = f"bench new thing {i}", f"bench new place {i}"
        vec = unit()
        with db.transaction() as conn:
            sid = segments.upsert_segment(
                conn,
                SegmentWrite(
                    user_id=user_id,
                    session_id="bench-new",
                    scale_seconds=30,
                    window_start=start,
                    window_end=start + timedelta(seconds=30),
                    caption=f"I put the {name} in the {other}.",
                    processing_status="complete",
                ),
            )
            a = entities.insert_canonical_entity(conn, user_id, name, vec).id
            b = entities.insert_canonical_entity(conn, user_id, other, unit()).id
            written_segments.append(sid)
            written_entities += [a, b]
            triples.insert_triples(
                conn,
                user_id,
                sid,
                "episodic",
                [
                    TripleWrite(
                        subject_entity_id=a, predicate=p, object_entity_id=b, embedding=unit()
                    )
                    for p in ("is in", "was put in", "stays in")
                ],
            )
        text = f"where is the {name}"
        stub.teach(
            text, [name], {text: np.asarray(vec, np.float32), name: np.asarray(vec, np.float32)}
        )
        t = time.perf_counter()
        asyncio.run(_timed_searches(deps, user_id, [Query("episodic", text, [name], {})], [None]))
        times.append(1000 * (time.perf_counter() - t))
        ranked = rank_scale(
            deps, user_id, 30, 10, np.asarray(vec, np.float32), {entity_node(name): 1.0}, None
        )
        visible.append(sid in [s for s, _ in ranked])
    # Leave the user's memory exactly as loaded (a later --reuse run checks its row counts).
    with db.transaction() as conn:
        for table, column, ids in (
            ("triples", "segment_id", written_segments),
            ("segments", "id", written_segments),
            ("entities", "id", written_entities),
        ):
            conn.execute(
                f"DELETE FROM {table} WHERE user_id = %s AND {column} = ANY(%s)", (user_id, ids)
            )
        conn.execute(
            "DELETE FROM sessions WHERE user_id = %s AND session_id = 'bench-new'", (user_id,)
        )
    return {"ms": times, "visible": visible}


def measure_ppr_overlap(
    deps: Any, user_id: str, queries: Sequence[Query], epsilon: float
) -> dict[str, Any]:
    """Per scale: top-k of local push against exact PRPACK from the same seeds (the search's
    own: the query's entities and its nearest facts), k from ``episodic_top_k``, and each
    method's solve time. Uses the graphs in the memo (warm)."""
    from worldmm.memory.retrieval.graph_lane import (
        FACT_SEEDS,
        entity_seed_scores,
        fact_segment_scores,
        merge_scores,
        top_segments,
    )
    from worldmm.memory.retrieval.graphs import load_timed

    settings = deps.settings
    out: dict[str, Any] = {}
    for scale, k in sorted(settings.episodic_top_k_map().items()):
        graph = load_timed(deps.reader, deps.cache, deps.graphs, user_id, "episodic", scale)
        overlaps, push_ms, exact_ms = [], [], []
        for q in queries:
            vecs = deps.embedder.embed([q.text, *q.entities])
            facts = deps.reader.top_triples(user_id, "episodic", vecs[0], FACT_SEEDS, scale=scale)
            names = merge_scores(
                entity_seed_scores(deps, user_id, vecs[1:]), fact_seed_scores(facts)
            )
            reset = seed_vertices(graph, names, None, fact_segment_scores(facts))
            if not reset:
                continue
            t = time.perf_counter()
            pushed = ppr(graph, reset, None, settings.ppr_damping, "push", epsilon)
            t1 = time.perf_counter()
            exact = ppr(graph, reset, None, settings.ppr_damping, "prpack")
            t2 = time.perf_counter()
            a = {s for s, _ in top_segments(graph, pushed, None, k)}
            b = {s for s, _ in top_segments(graph, exact, None, k)}
            overlaps.append(len(a & b) / max(1, min(k, len(b))))
            push_ms.append(1000 * (t1 - t))
            exact_ms.append(1000 * (t2 - t1))
        out[str(scale)] = {
            "k": k,
            "queries": len(overlaps),
            "overlap_at_k_mean": round(float(np.mean(overlaps)), 4) if overlaps else None,
            "overlap_at_k_min": round(float(np.min(overlaps)), 4) if overlaps else None,
            "push_ms_p50": summary(push_ms).get("p50"),
            "prpack_ms_p50": summary(exact_ms).get("p50"),
            "vertices": graph.n,
            "units": graph.units,
        }
    return out
