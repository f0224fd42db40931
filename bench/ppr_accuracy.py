"""Local push against exact PRPACK on the query benchmark's 30 s graph, without a database:
random seed sets (four entities, five dense segment scores, as a search makes them), the top
``--k`` segments of push at each ``--eps`` against PRPACK's (docs/benchmarks/query.md).

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
from worldmm.graph.timed import TimedGraph, build_timed, to_micros
from worldmm.graph.types import GraphTriple, entity_node
from worldmm.memory.retrieval.graph_lane import top_segments


def rows_30s(memory: SyntheticMemory) -> list[GraphTriple]:
    """The 30 s episodic rows as the store returns them (valid_from = window end)."""
    ep, vocab = memory.episodic, memory.vocab
    starts = memory.segments.starts[30]
    out = []
    for i in np.flatnonzero(ep.scale == 30):
        seg = int(ep.segment[i])
        literal = bool(ep.literal[i] >= 0)
        obj = vocab.literals[ep.literal[i]] if literal else vocab.names[ep.obj[i]]
        end = starts[seg] + timedelta(seconds=30)
        out.append(
            GraphTriple(int(i), vocab.names[ep.subj[i]], "p", obj, literal, seg, 30, end, None)
        )
    return out


def random_resets(
    graph: TimedGraph, names: list[str], segments: int, count: int, as_of: int | None, seed: int
) -> list[dict]:
    """``count`` seed vectors as a search makes them: four entities, five dense segment scores."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        seeds = {entity_node(n): float(rng.uniform(0.6, 1)) for n in rng.choice(names, 4)}
        dense = {int(s): float(rng.uniform(0.5, 1)) for s in rng.choice(segments, 5)}
        out.append(seed_vertices(graph, seeds, as_of, dense))
    return out


def compare(
    graph: TimedGraph,
    resets: Sequence[dict],
    as_of: int | None,
    k: int,
    eps_list: Sequence[float],
    damping: float = 0.85,
) -> dict[str, Any]:
    """From each seed vector, the top ``k`` segments of forward push at each epsilon against
    exact PRPACK's: overlap@k (mean, min) and each solver's median milliseconds."""
    exact_ms: list[float] = []
    overlap: dict[float, list[float]] = {e: [] for e in eps_list}
    push_ms: dict[float, list[float]] = {e: [] for e in eps_list}
    for reset in resets:
        t = time.perf_counter()
        exact = ppr(graph, reset, as_of, damping, "prpack")
        exact_ms.append(1000 * (time.perf_counter() - t))
        want = {s for s, _ in top_segments(graph, exact, as_of, k)}
        for eps in eps_list:
            t = time.perf_counter()
            pushed = ppr(graph, reset, as_of, damping, "push", eps)
            push_ms[eps].append(1000 * (time.perf_counter() - t))
            got = {s for s, _ in top_segments(graph, pushed, as_of, k)}
            overlap[eps].append(len(got & want) / max(1, len(want)))

    def figures(eps: float) -> dict[str, float | None]:
        o = overlap[eps]
        return {
            "overlap_at_k_mean": round(float(np.mean(o)), 3) if o else None,
            "overlap_at_k_min": round(float(np.min(o)), 3) if o else None,
            "push_ms_p50": round(percentile(push_ms[eps], 50) or 0.0, 1),
        }

    return {
        "queries": len(resets),
        "prpack_ms_p50": round(percentile(exact_ms, 50) or 0.0, 1),
        "push": {f"{eps:g}": figures(eps) for eps in eps_list},
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
    names, segments = list(memory.vocab.names), len(memory.segments.starts[30])
    middle = to_micros(cfg.start + timedelta(hours=cfg.hours / 2))
    for label, as_of in (("now", None), ("as_of_middle", middle)):
        resets = random_resets(graph, names, segments, args.queries, as_of, args.seed)
        result[label] = compare(graph, resets, as_of, args.k, args.eps)
        echo(f"{label}: {result[label]}")
    harness.write_report(run.stamp(result), args.out)
    return result


if __name__ == "__main__":
    main()
