"""The query benchmark's measurements of the time-masked graphs (:mod:`worldmm.graph.timed`):
build / cold-load / extend cost per graph, and how soon a new 30 s segment is visible."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from bench.query_synth import Query
from worldmm.graph.timed import build_timed, extend
from worldmm.graph.timed_io import dumps_timed, loads_timed
from worldmm.graph.types import entity_node
from worldmm.memory.retrieval.lanes import TERM_STATS_CHECK_S
from worldmm.models import SCALES


def _ms(seconds: float) -> float:
    return round(1000 * seconds, 1)


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
        entry: dict[str, Any] = {
            "fetch_ms": _ms(t1 - t0),
            "build_ms": _ms(t2 - t1),
            "total_ms": _ms(t2 - t0),
            "serialise_ms": _ms(t3 - t2),
            "cold_load_ms": _ms(time.perf_counter() - t3),
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
            entry["extend_one_segment_ms"] = _ms(float(np.median(times)))
        out[str(scale) if scale is not None else "semantic"] = entry
    return out


async def timed_searches(
    deps: Any, user_id: str, queries: Sequence[Query], as_of: Sequence[datetime | None], fresh: bool
) -> tuple[list[float], list[int]]:
    """Milliseconds and hits of each query's search (``as_of`` one per query); with ``fresh``
    the graph memo is emptied first, as in a process that has not served this user (graphs
    come from Redis, or are built from PostgreSQL when no Redis is configured)."""
    from worldmm.graph.cache import GraphMemo
    from worldmm.memory.retrieval import search

    times, hits = [], []
    for q, when in zip(queries, as_of, strict=True):
        if fresh:
            deps.graphs = GraphMemo(deps.settings.graph_memo_elements)
        t = time.perf_counter()
        result = await search(deps, q.memory_type, user_id, q.text, when)  # type: ignore[arg-type]
        times.append(1000 * (time.perf_counter() - t))
        hits.append(len(result.hits))
    return times, hits


def as_of_times(end: datetime, n: int, seed: int, span: timedelta) -> list[datetime]:
    """``n`` question times drawn uniformly from the last ``span`` of the memory."""
    rng = np.random.default_rng(seed)
    return [end - span * float(x) for x in rng.random(n)]


def measure_new_segments(
    db: Any, deps: Any, stub: Any, user_id: str, end: datetime, dim: int, n: int
) -> dict[str, Any]:
    """Write a new 30 s segment (3 triples about a new entity) after the memory's end, then
    time the next episodic search, asked once the term statistics are due a check; the
    segment must be among the 30 s graph's ranking of a query about its entity (checked after
    the timed search, from the same graph). The rows are deleted at the end, so a later
    ``--reuse`` run finds the memory as loaded."""
    from worldmm.memory.retrieval.graph_lane import rank_scale
    from worldmm.store import entities, segments, triples
    from worldmm.store.models import SegmentWrite, TripleWrite

    rng = np.random.default_rng(7)

    def unit() -> list[float]:
        v = rng.normal(size=dim)
        return (v / np.linalg.norm(v)).astype(np.float32).tolist()

    times, visible, written = [], [], {"segments": [], "entities": []}
    for i in range(n):
        start = end + timedelta(seconds=30 * i)
        name, other = f"bench new thing {i}", f"bench new place {i}"
        vec = unit()
        segment = SegmentWrite(
            user_id=user_id,
            session_id="bench-new",
            scale_seconds=30,
            window_start=start,
            window_end=start + timedelta(seconds=30),
            caption=f"I put the {name} in the {other}.",
            processing_status="complete",
        )
        with db.transaction() as conn:
            sid = segments.upsert_segment(conn, segment)
            a = entities.insert_canonical_entity(conn, user_id, name, vec).id
            b = entities.insert_canonical_entity(conn, user_id, other, unit()).id
            facts = [
                TripleWrite(subject_entity_id=a, predicate=p, object_entity_id=b, embedding=unit())
                for p in ("is in", "was put in", "stays in")
            ]
            triples.insert_triples(conn, user_id, sid, "episodic", facts)
        written["segments"].append(sid)
        written["entities"] += [a, b]
        text, query_vec = f"where is the {name}", np.asarray(vec, np.float32)
        stub.teach(text, [name], {text: query_vec, name: query_vec})
        asked = [Query("episodic", text, [name], {})]
        # A live question comes a while after the last window was written: the lanes' term
        # statistics are then old enough to be checked and brought up to date, as here.
        time.sleep(TERM_STATS_CHECK_S)
        times += asyncio.run(timed_searches(deps, user_id, asked, [None], fresh=False))[0]
        ranked = rank_scale(deps, user_id, 30, 10, query_vec, {entity_node(name): 1.0}, None)
        visible.append(sid in [s for s, _ in ranked])
    with db.transaction() as conn:  # their triples go with them (ON DELETE CASCADE)
        for table, ids in written.items():
            conn.execute(f"DELETE FROM {table} WHERE user_id = %s AND id = ANY(%s)", (user_id, ids))
        conn.execute(
            "DELETE FROM sessions WHERE user_id = %s AND session_id = 'bench-new'", (user_id,)
        )
    return {"ms": times, "visible": visible}
