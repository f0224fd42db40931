"""Local push against exact PRPACK on the query benchmark's 30 s graph, without a database.

Builds the time-masked 30 s graph of ``--days`` of the synthetic memory (the rows the query
benchmark loads, same generator and seed), then for ``--queries`` random seed sets (four
entities, five dense segment scores, as a search makes them) compares the top ``--k``
segments of forward push at each ``--eps`` with PRPACK's: overlap@k (mean, min) and each
solver's median time. Also the cost of the graph's Redis bytes and of extending it by one
segment. Run:

    python -m bench.ppr_accuracy --days 7 --eps 1e-5,1e-6 --out ppr.json
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from bench import harness
from bench.harness import Commas, percentile
from bench.query_synth import SynthConfig, SyntheticMemory, hours_of
from worldmm.graph.pagerank import ppr, seed_vertices
from worldmm.graph.timed import TimedGraph, build_timed, extend, to_micros
from worldmm.graph.timed_io import dumps_timed, loads_timed
from worldmm.graph.types import GraphRow, entity_node
from worldmm.memory.retrieval.graph_lane import top_segments


def rows_30s(memory: SyntheticMemory) -> list[GraphRow]:
    """The 30 s episodic rows as the store returns them (valid_from = window end)."""
    ep, vocab = memory.episodic, memory.vocab
    starts = memory.segments.starts[30]
    out = []
    for i in np.flatnonzero(ep.scale == 30):
        seg = int(ep.segment[i])
        literal = bool(ep.literal[i] >= 0)
        obj = vocab.literals[ep.literal[i]] if literal else vocab.names[ep.obj[i]]
        end = starts[seg] + timedelta(seconds=30)
        out.append(GraphRow(int(i), vocab.names[ep.subj[i]], "p", obj, literal, seg, 30, end, None))
    return out


def compare(
    graph: TimedGraph,
    names: list[str],
    segments: int,
    eps_list: Sequence[float],
    queries: int,
    k: int,
    as_of: int | None,
    seed: int,
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    per: dict[float, dict[str, list[float]]] = {e: {"overlap": [], "ms": []} for e in eps_list}
    exact_ms = []
    for _ in range(queries):
        seeds = {entity_node(n): float(rng.uniform(0.6, 1)) for n in rng.choice(names, 4)}
        dense = {int(s): float(rng.uniform(0.5, 1)) for s in rng.choice(segments, 5)}
        reset = seed_vertices(graph, seeds, as_of, dense)
        t = time.perf_counter()
        exact = ppr(graph, reset, as_of, 0.85, "prpack")
        exact_ms.append(1000 * (time.perf_counter() - t))
        want = {s for s, _ in top_segments(graph, exact, as_of, k)}
        for eps in eps_list:
            t = time.perf_counter()
            pushed = ppr(graph, reset, as_of, 0.85, "push", eps)
            per[eps]["ms"].append(1000 * (time.perf_counter() - t))
            got = {s for s, _ in top_segments(graph, pushed, as_of, k)}
            per[eps]["overlap"].append(len(got & want) / max(1, len(want)))
    return {
        "prpack_ms_p50": round(percentile(exact_ms, 50), 1),
        "push": {
            f"{eps:g}": {
                "overlap_at_k_mean": round(float(np.mean(v["overlap"])), 3),
                "overlap_at_k_min": round(float(np.min(v["overlap"])), 3),
                "ms_p50": round(percentile(v["ms"], 50), 1),
            }
            for eps, v in per.items()
        },
    }


class PprOptions(harness.Options):
    days: float = Field(7.0, description="Days of synthetic memory.")
    eps: Annotated[tuple[float, ...], Commas] = Field(
        (1e-5, 1e-6), description="Push error bounds, comma-separated."
    )
    queries: int = Field(10, description="Random seed sets.")
    k: int = Field(10, description="Top segments compared.")
    seed: int = Field(0, description="Generator seed.")


@harness.main(PprOptions)
def main(args: PprOptions) -> dict[str, Any]:
    """Local push against exact PRPACK on the query benchmark's 30 s graph (no database):
    overlap@k and each solver's time, now and as of the memory's middle."""
    run, echo = harness.Run(), harness.stamped_echo()
    cfg = SynthConfig(hours=hours_of(args.days), seed=args.seed)
    memory = SyntheticMemory(cfg)
    rows = rows_30s(memory)
    t = time.perf_counter()
    graph = build_timed("episodic", rows)
    result: dict[str, Any] = {
        "benchmark": "ppr-accuracy",
        "days": args.days,
        "rows": len(rows),
        "vertices": graph.n,
        "units": graph.units,
        "build_ms": round(1000 * (time.perf_counter() - t)),
    }
    echo(f"graph: {graph.n} vertices, {graph.units} units")
    t = time.perf_counter()
    data = dumps_timed(graph)
    t1 = time.perf_counter()
    loads_timed(data)
    result["cached_bytes"] = len(data)
    result["serialise_ms"] = round(1000 * (t1 - t), 1)
    result["cold_load_ms"] = round(1000 * (time.perf_counter() - t1), 1)
    last = max(r.segment_id or 0 for r in rows)
    base = build_timed("episodic", [r for r in rows if r.segment_id != last])
    t = time.perf_counter()
    extend(base, [r for r in rows if r.segment_id == last])
    result["extend_one_segment_ms"] = round(1000 * (time.perf_counter() - t), 1)
    eps_list = args.eps
    names = list(memory.vocab.names)
    segments = len(memory.segments.starts[30])
    middle = to_micros(cfg.start + timedelta(hours=cfg.hours / 2))
    for label, as_of in (("now", None), ("as_of_middle", middle)):
        result[label] = compare(
            graph, names, segments, eps_list, args.queries, args.k, as_of, args.seed
        )
        echo(f"{label}: {result[label]}")
    harness.write_report(run.stamp(result), args.out)
    return result


if __name__ == "__main__":
    main()
